"""A dead peer becomes an error: SIGKILL one of two worker-mode trainers
mid-epoch; the other raises a clear error within 30 s, every process exits,
and /dev/shm holds nothing new."""

import gc
import multiprocessing
import os
import signal
import time

import pytest
from event_pipes import EventPipes
from test_dist_sampling import free_port, partition

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context('spawn')
ERROR_WITHIN_S = 30


def trainer(rank, port, root, events):
  import graphlearn_torch as glt

  dist = glt.distributed
  dist.init_worker_group(2, rank, 'trainer')
  ds = dist.DistDataset(edge_dir='out').load(root, rank, graph_mode='CPU')
  options = dist.MpDistSamplingWorkerOptions(
    num_workers=1, master_addr='127.0.0.1', master_port=port, rpc_timeout=60, channel_size='16MB'
  )
  loader = dist.DistNeighborLoader(
    ds, [3, 2], ds.train_idx, batch_size=4, shuffle=True, collect_features=True,
    worker_options=options,
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


def test_killed_trainer_becomes_an_error_in_the_other(tmp_path):
  before = set(os.listdir('/dev/shm'))
  partition(str(tmp_path), 2, hetero=False)
  events = EventPipes()
  port = free_port()
  procs = [
    SPAWN.Process(target=trainer, args=(r, port, str(tmp_path), events.writer())) for r in (0, 1)
  ]
  for p in procs:
    p.start()
  samplers = []
  try:
    for rank in (0, 1):
      samplers += events.wait('samplers', rank, failures=('error',))
    for rank in (0, 1):
      events.wait('running', rank, failures=('error',))
    killed_at = time.monotonic()
    os.kill(procs[1].pid, signal.SIGKILL)
    raised_at, message = events.wait('error', 0, timeout=ERROR_WITHIN_S + 5)
    print(f'survivor raised after {raised_at - killed_at:.1f} s: {message[:300]}')
    assert raised_at - killed_at < ERROR_WITHIN_S
    assert 'sampling process' in message or 'Channel' in message
    shutdown_s = events.wait('left', 0, timeout=30)
    print(f'survivor loader.shutdown() took {shutdown_s:.1f} s')
    assert shutdown_s < 5, 'after a failure the loader leaves at once'
    procs[0].join(60)
    assert procs[0].exitcode == 0
    deadline = time.monotonic() + 30
    while not all(exited(pid) for pid in samplers) and time.monotonic() < deadline:
      time.sleep(0.1)
    assert all(exited(pid) for pid in samplers), 'every sampling process exits'
  finally:
    for p in procs:
      if p.is_alive():
        p.kill()
      p.join()
    for pid in samplers:
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
