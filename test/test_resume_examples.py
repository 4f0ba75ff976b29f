"""Jobs resume as a whole: the distributed example killed mid-epoch (every
process of the job) resumes from its checkpoints to the model the
uninterrupted job trains, a failed spawned process fails the job at once,
and the single-machine example resumes to the same model. Processes are
reaped also on failure."""

import datetime
import functools
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from conftest import kill_sessions
from test_dist_fault import GPU_SLACK_BYTES, gpu_used_bytes
from test_dist_sampling import free_port
from test_examples_smoke import NEEDS_GPU, gpu_flags

import graphlearn_torch as glt

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[1] / 'examples' / 'distributed'
SEQ_PER_EPOCH = 1_000_000  # the example's checkpoint numbering (sage_common.Checkpoints)
EXAMPLE_EPOCHS = 3
KILL_AT = (2, 3)  # the job is killed once every trainer checkpointed epoch 2 after 3 steps


def example_args(root, ckpt, ports, mode='CPU'):
  r"""The worker-mode example's command line; in graph mode ``mode`` with
  GLT's GPU flags where it is not 'CPU'."""
  return [
    sys.executable, str(EXAMPLE / 'dist_train_sage_supervised.py'),
    '--dataset_root_dir', str(root), '--synthetic_nodes', '4000', '--epochs',
    str(EXAMPLE_EPOCHS), '--batch_size', '16', '--fanout', '5', '5', '--hidden', '16',
    '--checkpoint', str(ckpt), '--checkpoint_every', '3', '--deterministic', '--timeout', '60',
    '--training_pg_master_port', str(ports[0]), '--train_loader_master_port', str(ports[1]),
    '--test_loader_master_port', str(ports[2]), '--no-progress',
    *(gpu_flags(mode) if mode != 'CPU' else ()),
  ]  # fmt: skip


def final_model(ckpt) -> dict:
  seq = (EXAMPLE_EPOCHS + 1) * SEQ_PER_EPOCH
  path = ckpt / 'rank0' / f'model_seq_{seq}.ckpt'
  return torch.load(path, weights_only=True)['model_state_dict']


def session_processes(sid: int) -> list:
  r"""Live processes of session ``sid``."""
  found = []
  for entry in os.listdir('/proc'):
    if entry.isdigit():
      try:
        with open(f'/proc/{entry}/stat') as f:
          fields = f.read().rsplit(')', 1)[1].split()
      except (FileNotFoundError, ProcessLookupError):
        continue
      if int(fields[3]) == sid and fields[0] not in ('Z', 'X'):
        found.append(int(entry))
  return found


def run_to_end(cmd, timeout=300) -> str:
  done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
  out = done.stdout + done.stderr
  assert done.returncode == 0, out[-4000:]
  return out


@pytest.mark.parametrize(
  'mode', ['CPU', *(pytest.param(m, marks=NEEDS_GPU) for m in ('ZERO_COPY', 'CUDA'))]
)
def test_killed_job_resumes_to_the_uninterrupted_model(tmp_path, mode):
  r"""The worker-mode example, 2 trainers with a sampling process each,
  checkpointing every 3 steps: SIGKILLed whole mid-run and restarted with
  --resume, it ends with the parameters of an uninterrupted run, equal;
  nothing of the killed job is left (processes, /dev/shm; on the GPU, its
  memory)."""
  ports = [free_port() for _ in range(3)]
  args = functools.partial(example_args, ports=ports, mode=mode)
  gpu_before = gpu_used_bytes(mode)
  run_to_end(args(tmp_path, tmp_path / 'whole'))
  want = final_model(tmp_path / 'whole')

  before = set(os.listdir('/dev/shm'))
  ckpt = tmp_path / 'killed'
  mark = [
    ckpt / f'rank{r}' / f'model_seq_{KILL_AT[0] * SEQ_PER_EPOCH + KILL_AT[1]}.ckpt' for r in (0, 1)
  ]
  job = subprocess.Popen(
    args(tmp_path, ckpt), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    start_new_session=True,
  )  # fmt: skip
  try:
    deadline = time.monotonic() + 240
    while not all(m.exists() for m in mark) and job.poll() is None:
      assert time.monotonic() < deadline, 'the job never reached the checkpoint'
      time.sleep(0.01)
    assert job.poll() is None, f'the job ended before it was killed:\n{job.stderr.read()[-3000:]}'
    os.killpg(job.pid, signal.SIGKILL)
  finally:
    kill_sessions([job])
  deadline = time.monotonic() + 30
  while session_processes(job.pid) and time.monotonic() < deadline:
    time.sleep(0.1)
  assert session_processes(job.pid) == [], 'every process of the killed job is gone'
  assert not (ckpt / 'rank0' / f'model_seq_{(EXAMPLE_EPOCHS + 1) * SEQ_PER_EPOCH}.ckpt').exists()

  restarted = time.time()
  out = run_to_end(args(tmp_path, ckpt) + ['--resume'])
  found = re.search(r'(\S+ \S+),(\d+) \[trainer \d\] resumed from checkpoint (\d+)', out)
  assert found, out[-3000:]
  at = datetime.datetime.strptime(found[1], '%Y-%m-%d %H:%M:%S').timestamp() + int(found[2]) / 1e3
  seq = int(found[3])
  print(f'resumed after {at - restarted:.1f} s from checkpoint {seq}')
  got = final_model(ckpt)
  assert got.keys() == want.keys()
  for name in want:
    assert torch.equal(got[name], want[name]), f'{name} differs from the uninterrupted run'
  # Every checkpoint after the resume holds the uninterrupted run's model:
  # no step was lost or taken twice on the way.
  later = sorted(int(p.stem.split('_')[-1]) for p in (ckpt / 'rank0').glob('model_seq_*.ckpt'))
  later = [s for s in later if s > seq]
  for s in later:
    a, b = (
      torch.load(d / 'rank0' / f'model_seq_{s}.ckpt', weights_only=True)
      for d in (ckpt, tmp_path / 'whole')
    )
    assert all(torch.equal(a['model_state_dict'][k], b['model_state_dict'][k]) for k in want), s
  print(
    f'{len(later)} checkpoints after the resume equal the uninterrupted run: lost 0, repeated 0'
  )
  deadline = time.monotonic() + 15
  while set(os.listdir('/dev/shm')) - before and time.monotonic() < deadline:
    time.sleep(0.1)
  assert set(os.listdir('/dev/shm')) - before == set(), 'nothing left in /dev/shm'
  assert gpu_used_bytes(mode) <= gpu_before + GPU_SLACK_BYTES, 'the GPU memory is back'


def fail_or_wait(index, started_dir):
  open(os.path.join(started_dir, str(index)), 'w').close()
  started = os.path.join(started_dir, 'started')  # a FIFO
  if index == 1:
    # fails once process 0 runs: forked processes start in milliseconds, and
    # one could fail before the other has begun
    reader = os.open(started, os.O_RDONLY | os.O_NONBLOCK)
    select.select([reader], [], [], 60)
    raise ValueError('process one fails')
  with open(started, 'w') as writer:  # opens once process 1 has
    writer.write('0')
  threading.Event().wait(120)  # killed by spawn long before


def test_spawn_raises_the_first_failure_and_kills_the_rest(tmp_path):
  before = set(os.listdir('/dev/shm'))
  os.mkfifo(tmp_path / 'started')
  started = time.monotonic()
  with pytest.raises(
    glt.utils.SpawnedProcessError, match='(?s)process 1 .*ValueError: process one fails'
  ):
    glt.utils.spawn(fail_or_wait, args=(str(tmp_path),), nprocs=2)
  assert time.monotonic() - started < 60, 'the waiting process was killed, not waited for'
  assert sorted(os.listdir(tmp_path)) == ['0', '1', 'started']
  assert set(os.listdir('/dev/shm')) - before == set()


def test_single_machine_example_resumes_to_the_same_model(tmp_path):
  r"""train_sage_ogbn_products.py run for 2 epochs, then resumed to 4 from
  its checkpoints, ends with the model (and best epoch) of a 4-epoch run."""
  script = EXAMPLE.parent / 'train_sage_ogbn_products.py'

  def run(ckpt, epochs, *more):
    return run_to_end([
      sys.executable, str(script), '--num_nodes', '2000', '--epochs', str(epochs),
      '--batch_size', '64', '--fanout', '5', '5', '--hidden', '16', '--checkpoint', str(ckpt),
      '--checkpoint_every', '4', '--deterministic', '--no-progress', *more,
    ])  # fmt: skip

  whole = run(tmp_path / 'whole', 4)
  run(tmp_path / 'parts', 2)
  resumed = run(tmp_path / 'parts', 4, '--resume')
  assert 'resumed from checkpoint 3000000' in resumed, resumed[-2000:]
  best = re.compile(r'best val accuracy .*')
  assert best.findall(resumed) == best.findall(whole), 'the same best epoch'
  seq = 5 * SEQ_PER_EPOCH
  a, b = (
    torch.load(d / f'model_seq_{seq}.ckpt', weights_only=True)['model_state_dict']
    for d in (tmp_path / 'whole', tmp_path / 'parts')
  )
  assert all(torch.equal(a[k], b[k]) for k in a)
