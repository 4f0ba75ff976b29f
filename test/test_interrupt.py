"""Ctrl-C on a job: a terminal interrupts every process of its foreground
process group. The launcher (glt.utils.spawn) gives the processes time to
stop as their scripts do, then kills the rest; sampling processes leave
quietly, as a DataLoader's workers do, so the user sees one KeyboardInterrupt:
the launcher's. A launcher killed alone has its processes interrupted so.
Each job runs in a session of its own (so the interrupt reaches only it) and
is reaped also on failure."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from output_lines import OutputLines
from test_dist_sampling import free_port

# Spawned processes: left out of make test-fast.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
READY_WITHIN_S = 300  # a job's start (a worker-mode example's first epoch)
STOP_WITHIN_S = 30


def group_members(pgid: int) -> list:
  out = subprocess.run(['pgrep', '-g', str(pgid)], capture_output=True, text=True).stdout
  return out.split()


def interrupt_when(proc: subprocess.Popen, ready: list, sig=signal.SIGINT, group=True) -> tuple:
  r"""Interrupts ``proc``'s process group (as a terminal's Ctrl-C), or sends
  ``sig`` to ``proc`` alone (``group=False``), once its output has shown
  every line part in ``ready`` (within ``READY_WITHIN_S``); returns (its
  output, seconds it took to exit, seconds until its group was empty).
  Kills the group on the way out."""
  lines = OutputLines(proc.stdout)
  waiting = set(ready)

  def all_seen(line: str) -> bool:
    waiting.difference_update({part for part in waiting if part in line})
    return not waiting

  try:
    lines.until(all_seen, READY_WITHIN_S, what=f'lines with each of {ready}')
    interrupted = time.monotonic()
    if group:
      os.killpg(proc.pid, sig)
    else:
      os.kill(proc.pid, sig)
    proc.wait(timeout=STOP_WITHIN_S)
    exited = time.monotonic() - interrupted
    deadline = interrupted + STOP_WITHIN_S
    while group_members(proc.pid) and time.monotonic() < deadline:
      time.sleep(0.1)  # polls the process table: other processes' exits give no event here
    assert not group_members(proc.pid), 'processes of the job outlived it'
    lines.rest(STOP_WITHIN_S)  # the output ends with the group
    return ''.join(lines.seen), exited, time.monotonic() - interrupted
  finally:
    if group_members(proc.pid):
      os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def start(args: list, env=None) -> subprocess.Popen:
  return subprocess.Popen(
    [sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    start_new_session=True, cwd=ROOT, env=env,
  )  # fmt: skip


def test_ctrl_c_stops_a_worker_mode_job_with_one_traceback(tmp_path):
  ports = [str(free_port()) for _ in range(3)]
  proc = start([
    'examples/distributed/dist_train_sage_supervised.py', '--epochs', '100', '--no-progress',
    '--dataset_root_dir', str(tmp_path), '--training_pg_master_port', ports[0],
    '--train_loader_master_port', ports[1], '--test_loader_master_port', ports[2],
  ])  # fmt: skip
  out, exited, emptied = interrupt_when(proc, ['epoch 1 '])
  assert proc.returncode != 0
  assert out.count('Traceback') == 1 and 'KeyboardInterrupt' in out, out[-4000:]
  assert 'glt-sampler' not in out, 'a sampling process printed its interrupt'
  assert 'never awaited' not in out, out[-4000:]
  assert 'killing process' not in out, 'the trainers stopped on their own'
  print(f'exited {exited:.1f} s after the interrupt, every process {emptied:.1f} s after')


LAUNCHER = textwrap.dedent("""
  import logging, os, sys, time
  import graphlearn_torch as glt
  logging.basicConfig(level=logging.INFO)

  def work(index, marks, stubborn):
    try:
      os.write(1, f'started {index}\\n'.encode())  # one write: the two processes' lines never mix
      while True:
        time.sleep(0.05)
    except KeyboardInterrupt:
      if stubborn:
        while True:
          time.sleep(0.05)
      open(f'{marks}/{index}', 'w').close()  # its own clean-up ran
      raise

  if __name__ == '__main__':
    glt.utils.spawn(work, args=(sys.argv[1], sys.argv[2] == 'stubborn'), nprocs=2)
""")


@pytest.mark.parametrize('kind', ['clean', 'stubborn'])
def test_spawn_gives_interrupted_processes_time_to_stop(tmp_path, kind):
  script = tmp_path / 'launch.py'
  script.write_text(LAUNCHER)
  marks = tmp_path / 'marks'
  marks.mkdir()
  env = {**os.environ, 'PYTHONPATH': str(ROOT)}
  if kind == 'stubborn':  # processes that ignore the interrupt are killed after the grace
    script.write_text(LAUNCHER.replace('import graphlearn_torch as glt', (
      "import graphlearn_torch as glt\n"
      "sys.modules['graphlearn_torch.utils.spawn'].INTERRUPT_GRACE_S = 2.0"
    )))  # fmt: skip
  proc = start([str(script), str(marks), kind], env=env)
  out, exited, _ = interrupt_when(proc, ['started 0', 'started 1'])
  assert 'interrupted: waiting up to' in out, out
  if kind == 'clean':
    assert sorted(os.listdir(marks)) == ['0', '1'], out
    assert exited < 10 and 'killing process' not in out, out
  else:
    assert os.listdir(marks) == [], out
    assert out.count('killing process') == 2 and 'did not stop after the interrupt' in out, out
    assert 2 <= exited < 10, exited


def test_processes_stop_when_their_launcher_is_killed(tmp_path):
  script = tmp_path / 'launch.py'
  script.write_text(LAUNCHER)
  marks = tmp_path / 'marks'
  marks.mkdir()
  proc = start([str(script), str(marks), 'clean'], env={**os.environ, 'PYTHONPATH': str(ROOT)})
  out, _, emptied = interrupt_when(proc, ['started 0', 'started 1'], signal.SIGKILL, group=False)
  assert sorted(os.listdir(marks)) == ['0', '1'], 'each ran its own clean-up:\n' + out
  assert out.count('the launcher (pid') == 2, out
  print(f'every process stopped {emptied:.1f} s after the launcher was killed')
