"""The shared-memory channel never gets the machine OOM-killed: run inside a
memory cgroup the test makes (and removes), a channel larger than the
cgroup's room, and messages past it, are MemoryErrors in a process that then
exits normally. Skipped where no memory cgroup can be made."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

V1_ROOT = Path('/sys/fs/cgroup/memory')


def own_cgroup_dir() -> Path:
  with open('/proc/self/cgroup') as f:
    for line in f:
      _, controllers, path = line.rstrip('\n').split(':', 2)
      if 'memory' in controllers.split(','):
        return V1_ROOT / path.lstrip('/')
  raise FileNotFoundError('no cgroup v1 memory controller for this process')


@pytest.fixture
def memory_cgroup():
  r"""A child memory cgroup (v1) of this process's, removed afterwards; yields
  ``run(limit_bytes, code) -> CompletedProcess`` running ``code`` inside it."""
  try:
    cg = own_cgroup_dir() / f'glt_test_{os.getpid()}'
    cg.mkdir()
  except OSError as e:
    pytest.skip(f'cannot make a memory cgroup here: {e}')

  def run(limit: int, code: str) -> subprocess.CompletedProcess:
    (cg / 'memory.limit_in_bytes').write_text(str(limit))
    script = f'echo $$ > {cg}/cgroup.procs && exec "$0" -c "$1"'
    return subprocess.run(
      ['sh', '-c', script, sys.executable, textwrap.dedent(code)],
      capture_output=True, text=True, timeout=120,
    )  # fmt: skip

  try:
    yield run, cg
  finally:
    cg.rmdir()  # its processes have exited


def test_a_channel_larger_than_the_cgroup_is_a_memory_error(memory_cgroup):
  run, _ = memory_cgroup
  done = run(
    1536 << 20,
    """
    import graphlearn_torch as glt
    try:
      glt.channel.ShmChannel(2, '4GB')
    except MemoryError as e:
      print('MemoryError:', e)
    """,
  )
  assert done.returncode == 0, done.stderr[-3000:]
  assert 'MemoryError: a shared-memory channel of 4294967296 bytes' in done.stdout
  assert 'memory cgroup limit' in done.stdout


def test_messages_past_the_cgroup_are_memory_errors_not_oom_kills(memory_cgroup):
  run, cg = memory_cgroup
  done = run(
    1 << 30,
    """
    import torch
    import graphlearn_torch as glt
    channel = glt.channel.ShmChannel(64, '500MB')  # fits when made
    hog = torch.ones(400 << 18)  # then the process takes 400 MB more
    sent = 0
    try:
      for _ in range(20):
        channel.send({'x': torch.ones(16 << 20)})  # 64 MB, kept in the channel
        sent += 1
    except MemoryError as e:
      print(f'MemoryError after {sent} messages:', e)
    print('EXITED NORMALLY')
    """,
  )
  assert done.returncode == 0, f'rc {done.returncode}: {done.stderr[-3000:]}'
  assert 'MemoryError after' in done.stdout and 'EXITED NORMALLY' in done.stdout, done.stdout
  oom = (cg / 'memory.oom_control').read_text()
  assert 'oom_kill 0' in oom or 'oom_kill' not in oom, oom
