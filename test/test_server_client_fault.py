"""Server-client liveness on loopback (2 servers, 2 clients):

- a client killed mid-epoch has its producers destroyed by every server
  within 30 s, while the other client trains on;
- a server killed mid-epoch makes both clients raise within 30 s, and the
  other server exit;
- a client that fails and calls shutdown_client leaves the servers usable
  for the other client, and the servers exit once both clients are gone.

Figures (seconds to error or cleanup, server RSS) are printed (-s)."""

import os
import signal
import threading
import time
import traceback

import pytest
from event_pipes import EventPipes
from test_dist_sampling import SPAWN, free_port, partition

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

WITHIN_S = 30
FANOUT = [5, 5]


def rss_mb() -> float:
  with open('/proc/self/statm') as f:
    return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE') / 2**20


def server(rank, port, root, events):
  import graphlearn_torch as glt

  dist = glt.distributed
  try:
    ds = dist.DistDataset(edge_dir='out').load(root, rank, graph_mode='CPU')
    srv = dist.init_server(2, rank, ds, '127.0.0.1', port, num_clients=2, request_timeout=60)

    def report_producers():  # every change of the number of producers
      last = None
      while not srv.wait_for_exit(0.05):
        count = len(srv._producers)
        if count != last:
          events.put(('producers', rank, (time.monotonic(), count, rss_mb())))
          last = count

    watcher = threading.Thread(target=report_producers, daemon=True)
    watcher.start()
    dist.wait_and_shutdown_server(timeout=120)
    events.put(('server_exit', rank, time.monotonic()))
  except Exception:
    events.put(('server_error', rank, traceback.format_exc()))


def client(rank, port, root, events, fail_after=None, wait_for=None, ballast=False, num_workers=1):
  r"""Trains epochs until told to stop; reports when it runs and how it
  fails. ``fail_after``: raise after that many batches (then
  shutdown_client). ``wait_for``: an event to wait for before training on.
  ``ballast``: also create a loader of 10M seeds (40 MB on each server), so
  freeing a client's producers shows in the servers' RSS. ``num_workers``:
  sampling processes per server (1: the server samples itself)."""
  import graphlearn_torch as glt

  dist = glt.distributed
  batches = 0
  try:
    dist.init_client(2, 2, rank, '127.0.0.1', port, request_timeout=60)
    ds = dist.DistDataset(edge_dir='out').load(root, rank, graph_mode='CPU')
    options = dist.RemoteDistSamplingWorkerOptions(
      server_rank=[0, 1], num_workers=num_workers, worker_concurrency=2, prefetch_size=2,
      rpc_timeout=60,
    )  # fmt: skip
    loader = dist.DistNeighborLoader(
      None, FANOUT, ds.train_idx, batch_size=4, shuffle=True, collect_features=True,
      worker_options=options,
    )  # fmt: skip
    if ballast:
      many = ds.train_idx.repeat(10_000_000 // ds.train_idx.numel())
      kept = dist.DistNeighborLoader(None, FANOUT, many, batch_size=4, worker_options=options)  # noqa: F841
    epochs_after_wait = 0
    while True:
      for _ in loader:
        batches += 1
        if batches == 10:
          events.put(('running', rank, time.monotonic()))
        if fail_after is not None and batches == fail_after:
          raise RuntimeError('the training step failed')
      if wait_for is not None and wait_for.is_set():
        epochs_after_wait += 1
        if epochs_after_wait == 2:
          break
    loader.shutdown()
    events.put(('client_done', rank, batches))
  except Exception as e:
    events.put(('client_error', rank, (time.monotonic(), f'{type(e).__name__}: {e}')))
  finally:
    dist.shutdown_client()


class Job:
  r"""2 servers and 2 clients, reaped on exit."""

  def __init__(self, root, client_kwargs):
    port = free_port()
    self.events = EventPipes()
    self.servers = [
      SPAWN.Process(target=server, args=(r, port, root, self.events.writer())) for r in (0, 1)
    ]
    self.clients = [
      SPAWN.Process(
        target=client, args=(r, port, root, self.events.writer()), kwargs=client_kwargs[r]
      )
      for r in (0, 1)
    ]

  def __enter__(self):
    for p in self.servers + self.clients:
      p.start()
    return self

  def __exit__(self, *exc):
    for p in self.servers + self.clients:
      p.join(5 if exc[0] is None else 0)
      if p.is_alive():
        p.kill()
      p.join()

  def wait(self, kind, rank=None, timeout=120):
    r"""The value of the oldest unread event ``kind`` (of ``rank``); a
    server's error fails the test."""
    return self.events.wait(kind, rank, timeout, failures=('server_error',))

  def wait_producers(self, rank, count, timeout=120):
    r"""``(time, count, RSS)`` of server ``rank``'s first report of
    ``count`` producers from here on."""
    deadline = time.monotonic() + timeout
    while True:
      report = self.wait('producers', rank, max(0.1, deadline - time.monotonic()))
      if report[1] == count:
        return report


@pytest.mark.parametrize('num_workers', [1, 2])
def test_killed_client_has_its_producers_destroyed(tmp_path, num_workers):
  partition(str(tmp_path), 2, hetero=False)
  stop = SPAWN.Event()
  kwargs = [{'wait_for': stop}, {'ballast': True}]
  with Job(str(tmp_path), [{**k, 'num_workers': num_workers} for k in kwargs]) as job:
    job.wait('running', 0)
    job.wait('running', 1)
    before = {r: job.wait_producers(r, 3) for r in (0, 1)}  # both clients' producers
    killed_at = time.monotonic()
    os.kill(job.clients[1].pid, signal.SIGKILL)
    for rank in (0, 1):
      at, _, rss = job.wait_producers(rank, 1, timeout=WITHIN_S + 5)
      print(
        f'server {rank}: producers of the killed client destroyed after '
        f'{at - killed_at:.1f} s; RSS {before[rank][2]:.0f} MB -> {rss:.0f} MB'
      )
      assert at - killed_at < WITHIN_S
    stop.set()
    assert job.wait('client_done', 0) > 0, 'the other client trains on'
    for rank in (0, 1):
      job.wait('server_exit', rank, timeout=WITHIN_S)
  assert [p.exitcode for p in job.servers] == [0, 0]


@pytest.mark.parametrize('num_workers', [1, 2])
def test_killed_server_makes_clients_raise(tmp_path, num_workers):
  partition(str(tmp_path), 2, hetero=False)
  with Job(str(tmp_path), [{'num_workers': num_workers}] * 2) as job:
    job.wait('running', 0)
    job.wait('running', 1)
    killed_at = time.monotonic()
    os.kill(job.servers[1].pid, signal.SIGKILL)
    for rank in (0, 1):
      raised_at, message = job.wait('client_error', rank, timeout=WITHIN_S + 5)
      print(f'client {rank} raised after {raised_at - killed_at:.1f} s: {message[:200]}')
      assert raised_at - killed_at < WITHIN_S
      assert 'server 1' in message or 'server_1' in message, 'the error names the dead server'
    for p in job.clients:
      p.join(WITHIN_S)
      assert p.exitcode == 0, 'the clients exit'
    # and so does the other server, its sampling processes with it: they
    # leave their RPC world at once rather than wait for the dead server's
    exited_at = job.wait('server_exit', 0, timeout=WITHIN_S)
    print(f'server 0 exited after {exited_at - killed_at:.1f} s')


def test_failed_client_leaves_servers_usable(tmp_path):
  partition(str(tmp_path), 2, hetero=False)
  left = SPAWN.Event()
  with Job(str(tmp_path), [{'wait_for': left}, {'fail_after': 15}]) as job:
    at, message = job.wait('client_error', 1)
    assert 'the training step failed' in message
    job.clients[1].join(WITHIN_S)
    assert job.clients[1].exitcode == 0, 'shutdown_client returns after the error'
    left.set()  # client 0 now runs two more epochs on the same servers
    assert job.wait('client_done', 0) > 0
    for rank in (0, 1):
      job.wait('server_exit', rank, timeout=WITHIN_S)
  assert [p.exitcode for p in job.servers] == [0, 0]
