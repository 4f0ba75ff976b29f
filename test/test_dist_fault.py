"""A dead peer becomes an error: SIGKILL one of two worker-mode trainers, or
a sampling process, mid-epoch; the survivors raise a clear error within
30 s, every process exits, /dev/shm holds nothing new, and on the GPU
(graph modes 'ZERO_COPY' and 'CUDA', a fifth of the feature rows in GPU
memory) the device's memory is back to what it was: nothing is held for a
dead process."""

import gc
import multiprocessing
import os
import signal
import time

import pytest
import torch
from event_pipes import EventPipes
from test_dist_sampling import free_port, partition

from graphlearn_torch._ext import cuda_kernels_available

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context('spawn')
ERROR_WITHIN_S = 30
# GPU memory a finished job may leave in use on the device (the driver's
# own bookkeeping), in bytes.
GPU_SLACK_BYTES = 64 << 20
MODES = [
  'CPU',
  *(
    pytest.param(mode, marks=pytest.mark.skipif(not cuda_kernels_available(), reason='needs a GPU'))
    for mode in ('ZERO_COPY', 'CUDA')
  ),
]


def load(dist, root, rank, mode):
  if mode == 'CPU':
    return dist.DistDataset(edge_dir='out').load(root, rank, graph_mode='CPU')
  return dist.DistDataset(edge_dir='out').load(
    root, rank, graph_mode=mode, feature_with_gpu=True, device=0, split_ratio=0.2
  )


def trainer(rank, port, root, mode, events):
  import graphlearn_torch as glt

  dist = glt.distributed
  dist.init_worker_group(2, rank, 'trainer')
  ds = load(dist, root, rank, mode)
  device = None if mode == 'CPU' else torch.device('cuda', 0)
  options = dist.MpDistSamplingWorkerOptions(
    num_workers=1, master_addr='127.0.0.1', master_port=port, rpc_timeout=60,
    channel_size='16MB', worker_devices=None if device is None else [device],
  )  # fmt: skip
  loader = dist.DistNeighborLoader(
    ds, [3, 2], ds.train_idx, batch_size=4, shuffle=True, collect_features=True,
    worker_options=options, to_device=device,
  )  # fmt: skip
  samplers = [p.pid for p in multiprocessing.active_children() if p.name.startswith('glt-sampler')]
  events.put(('samplers', rank, samplers))
  batches = 0
  try:
    while True:
      for _ in loader:
        batches += 1
        if batches == 20:
          events.put(('running', rank, None))
  except Exception as e:
    events.put(('error', rank, (time.monotonic(), f'{type(e).__name__}: {e}')))
  finally:
    started = time.monotonic()
    loader.shutdown()
    events.put(('left', rank, time.monotonic() - started))


def exited(pid: int) -> bool:
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().rsplit(')', 1)[1].split()[0] in ('Z', 'X')
  except FileNotFoundError:
    return True


def gpu_used_bytes(mode: str) -> int:
  if mode == 'CPU':
    return 0
  free, total = torch.cuda.mem_get_info(0)
  return total - free


def run_and_kill(procs, events, kill: str, samplers: dict) -> None:
  r"""Starts the trainers, SIGKILLs trainer 1 (``kill='trainer'``) or its
  sampling process (``'sampler'``) once both are running, and checks what
  the survivors see; puts each trainer's sampling processes' pids in
  ``samplers``, by rank."""
  for p in procs:
    p.start()
  for rank in (0, 1):
    samplers[rank] = events.wait('samplers', rank, failures=('error',))
  for rank in (0, 1):
    events.wait('running', rank, failures=('error',))
  killed_at = time.monotonic()
  os.kill(procs[1].pid if kill == 'trainer' else samplers[1][0], signal.SIGKILL)
  survivors = (0,) if kill == 'trainer' else (1, 0)  # the dead sampler's trainer first
  for rank in survivors:
    raised_at, message = events.wait('error', rank, timeout=ERROR_WITHIN_S + 5)
    print(f'trainer {rank}: survivor raised after {raised_at - killed_at:.1f} s: {message[:300]}')
    assert raised_at - killed_at < ERROR_WITHIN_S
    assert 'sampling process' in message or 'Channel' in message or 'partition' in message
    shutdown_s = events.wait('left', rank, timeout=30)
    print(f'trainer {rank}: survivor loader.shutdown() took {shutdown_s:.1f} s')
    assert shutdown_s < 5, 'after a failure the loader leaves at once'
    procs[rank].join(60)
    assert procs[rank].exitcode == 0


@pytest.mark.parametrize('kill', ['trainer', 'sampler'])
@pytest.mark.parametrize('mode', MODES)
def test_a_killed_peer_becomes_an_error_in_the_others(tmp_path, mode, kill):
  before = set(os.listdir('/dev/shm'))
  gpu_before = gpu_used_bytes(mode)
  partition(str(tmp_path), 2, hetero=False)
  events = EventPipes()
  port = free_port()
  procs = [
    SPAWN.Process(target=trainer, args=(r, port, str(tmp_path), mode, events.writer()))
    for r in (0, 1)
  ]
  samplers = {}
  try:
    run_and_kill(procs, events, kill, samplers)
    pids = [pid for got in samplers.values() for pid in got]
    deadline = time.monotonic() + 30
    while not all(exited(pid) for pid in pids) and time.monotonic() < deadline:
      time.sleep(0.1)
    assert all(exited(pid) for pid in pids), 'every sampling process exits'
  finally:
    for p in procs:
      if p.is_alive():
        p.kill()
      p.join()
    for pid in (pid for got in samplers.values() for pid in got):
      if not exited(pid):
        os.kill(pid, signal.SIGKILL)
  # Semaphores of the trainers' multiprocessing queues go when the killed
  # trainer's resource tracker cleans up after it.
  del events
  gc.collect()
  deadline = time.monotonic() + 15
  while set(os.listdir('/dev/shm')) - before and time.monotonic() < deadline:
    time.sleep(0.1)
  assert set(os.listdir('/dev/shm')) - before == set()
  while gpu_used_bytes(mode) > gpu_before + GPU_SLACK_BYTES and time.monotonic() < deadline:
    time.sleep(0.1)
  assert gpu_used_bytes(mode) <= gpu_before + GPU_SLACK_BYTES, 'the GPU memory is back'
