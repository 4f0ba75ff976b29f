"""Start-up faults fail within the given timeout (plus 10 s) and say what is
missing; a sampling process that fails at start-up is reported at once; a
client that exits without shutdown_client() exits cleanly. Every process is
a subprocess bounded by a timeout and reaped."""

import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from output_lines import OutputLines
from test_dist_sampling import free_port, partition

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

TIMEOUT_S = 5  # the rpc / request timeout given to the processes
SLACK_S = 10
STARTUP_TIMEOUT_S = 20  # for waits that span another process's start-up


def start(code: str, *args) -> subprocess.Popen:
  return subprocess.Popen(
    [sys.executable, '-c', textwrap.dedent(code), *map(str, args)],
    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
  )  # fmt: skip


def finish(procs, timeout=90):
  outs = []
  try:
    for p in procs:
      outs.append(p.communicate(timeout=timeout)[0])
  finally:
    reap(procs)
  return outs


def reap(procs) -> None:
  r"""Kills those of ``procs`` still running, and waits for all of them."""
  for p in procs:
    if p.poll() is None:
      p.kill()
    p.wait(timeout=30)


WORKER = """
import sys, time
import graphlearn_torch as glt
rank, world, port = map(int, sys.argv[1:4])
timeout = float(sys.argv[4])
glt.distributed.init_worker_group(world, rank, 'trainer')
started = time.monotonic()
print('CONNECTING', flush=True)
try:
  glt.distributed.init_rpc('127.0.0.1', port, 2, timeout)
  glt.distributed.barrier()
  print('JOINED')
  glt.distributed.shutdown_rpc()
except Exception as e:
  print(f'FAILED after {time.monotonic() - started:.1f} s: {type(e).__name__}: {e}')
"""


def elapsed(out: str) -> float:
  seconds = float(out.split('FAILED after ')[1].split(' s')[0])
  print(f'failed after {seconds:.1f} s: {out.split("FAILED after ")[1].splitlines()[0][:200]}')
  return seconds


def test_a_peer_that_never_starts_is_named():
  (out,) = finish([start(WORKER, 0, 2, free_port(), TIMEOUT_S)])
  assert 'FAILED' in out and 'rank(s) [1] of 2 never arrived' in out, out
  assert elapsed(out) < TIMEOUT_S + SLACK_S


def test_no_rendezvous_at_the_port_is_named():
  (out,) = finish([start(WORKER, 1, 2, free_port(), TIMEOUT_S)])
  assert 'found no rendezvous' in out and 'rank 0 did not start there' in out, out
  # short connection attempts: torch's own retry alone would take up to
  # about 3 timeouts
  assert elapsed(out) < TIMEOUT_S + 4
  # nothing listened, so no store client tried and logged its C++ trace
  assert 'Exception raised from' not in out and 'socket has timed out' not in out, out


def test_a_rank_given_twice_and_a_wrong_world_size():
  port = free_port()
  # Two processes claim rank 1 of a world of 3 whose rank 2 never comes, so
  # rank 0 holds the rendezvous open for its whole timeout: the later twin
  # registers while it is open (with a world of 2, rank 0 and the first twin
  # could finish and close it before the second twin's connect retry lands).
  # The twins wait for rank 0, which starts after them: on a loaded machine
  # its start-up (importing torch) alone can take longer than TIMEOUT_S.
  twins = [start(WORKER, 1, 3, port, STARTUP_TIMEOUT_S) for _ in range(2)]
  try:
    twin_lines = [OutputLines(twin.stdout) for twin in twins]
    for lines in twin_lines:  # both wait for rank 0 before it starts
      line = lines.first_line(60)
      assert line.strip() == 'CONNECTING', f'expected CONNECTING, got {line!r}'
    rank_0 = finish([start(WORKER, 0, 3, port, STARTUP_TIMEOUT_S)])
    outs = [lines.rest(90) for lines in twin_lines] + rank_0
  finally:
    reap(twins)
  # waiting for a late rank 0 is quiet (no failed store connections)
  assert not any('socket has timed out' in o for o in outs[:2]), outs
  twice = [('joined the rendezvous' in o and 'twice' in o) for o in outs[:2]]
  assert sum(twice) == 1, outs
  assert 'rank(s) [2] of 3 never arrived' in outs[2], outs
  # the first twin times out first (it started first), or finds rank 0 gone
  first_twin = outs[twice.index(False)]
  assert 'never arrived' in first_twin or 'rank 0 closed the rendezvous' in first_twin, outs
  port = free_port()
  outs = finish([start(WORKER, 0, 2, port, TIMEOUT_S), start(WORKER, 1, 3, port, TIMEOUT_S)])
  assert 'disagree on the world size: {0: 2, 1: 3}' in outs[0], outs
  assert 'rank 0 closed the rendezvous' in outs[1] or 'never arrived' in outs[1], outs
  assert all(elapsed(o) < TIMEOUT_S + SLACK_S for o in outs)


SERVER = """
import sys
import graphlearn_torch as glt
root, (port, num_clients), timeout = sys.argv[1], map(int, sys.argv[2:4]), float(sys.argv[4])
ds = glt.distributed.DistDataset().load(root, 0, graph_mode='CPU')
try:
  glt.distributed.init_server(
    1, 0, ds, '127.0.0.1', port, num_clients=num_clients, request_timeout=timeout
  )
  glt.distributed.wait_and_shutdown_server(timeout=60)
  print('SERVER EXITED')
except Exception as e:
  print(f'FAILED: {type(e).__name__}: {e}')
"""

CLIENT = """
import sys, time, torch
import graphlearn_torch as glt
port, num_clients = map(int, sys.argv[1:3])
timeout, leave = float(sys.argv[3]), sys.argv[4]
started = time.monotonic()
try:
  glt.distributed.init_client(1, num_clients, 0, '127.0.0.1', port, request_timeout=timeout)
except Exception as e:
  print(f'FAILED after {time.monotonic() - started:.1f} s: {type(e).__name__}: {e}')
  sys.exit(0)
loader = glt.distributed.DistNeighborLoader(
  None, [2], torch.arange(10), batch_size=2, collect_features=True,
  worker_options=glt.distributed.RemoteDistSamplingWorkerOptions(server_rank=0, prefetch_size=2),
)
print('BATCH', next(iter(loader)).batch_size)
if leave == 'shutdown':
  glt.distributed.shutdown_client()
# else: exit with the loader alive and without shutdown_client(), as GLT users often do
"""


@pytest.fixture(scope='module')
def one_partition(tmp_path_factory):
  root = tmp_path_factory.mktemp('one_part')
  partition(str(root), 1, hetero=False)
  return str(root)


def test_a_client_without_servers_fails_in_time():
  (out,) = finish([start(CLIENT, free_port(), 1, TIMEOUT_S, 'shutdown')])
  assert 'FAILED' in out and 'found no rendezvous' in out, out
  assert elapsed(out) < TIMEOUT_S + SLACK_S


def test_servers_waiting_for_a_client_that_never_comes(one_partition):
  port = free_port()
  server = start(SERVER, one_partition, port, 2, TIMEOUT_S)
  client = start(CLIENT, port, 2, TIMEOUT_S, 'shutdown')
  server_out, client_out = finish([server, client])
  assert 'FAILED' in server_out and 'rank(s) [2] of 3 never arrived' in server_out, server_out
  # the client times out too, or finds that the server (rank 0) gave up first
  assert 'FAILED' in client_out, client_out
  assert 'never arrived' in client_out or 'rank 0 closed the rendezvous' in client_out, client_out
  assert elapsed(client_out) < TIMEOUT_S + SLACK_S


@pytest.mark.parametrize('leave', ['exit', 'shutdown'])
def test_a_client_that_just_exits_leaves_cleanly(one_partition, leave):
  port = free_port()
  server = start(SERVER, one_partition, port, 1, 30)
  client = start(CLIENT, port, 1, 30, leave)
  server_out, client_out = finish([server, client])
  assert client.returncode == 0 and 'BATCH 2' in client_out, client_out
  assert 'FATAL' not in client_out and 'terminate called' not in client_out, client_out
  assert server.returncode == 0 and 'SERVER EXITED' in server_out, server_out


def trainer_with_a_missing_partition(root, port, results):
  import graphlearn_torch as glt

  dist = glt.distributed
  dist.init_worker_group(1, 0, 'trainer')
  ds = dist.DistDataset().load(root, 0, graph_mode='CPU')
  shutil.rmtree(root)  # the sampling processes reload the partition: they fail at start-up
  options = dist.MpDistSamplingWorkerOptions(
    num_workers=2, master_addr='127.0.0.1', master_port=port, rpc_timeout=60, channel_size='4MB'
  )
  started = time.monotonic()
  try:
    dist.DistNeighborLoader(ds, [2], torch.arange(10), worker_options=options)
    results.put(('created', 0.0))
  except Exception as e:
    results.put((f'{type(e).__name__}: {e}', time.monotonic() - started))


def test_a_sampling_process_failing_at_start_up_is_reported_at_once(tmp_path):
  import multiprocessing

  root = tmp_path / 'doomed'
  partition(str(root), 1, hetero=False)
  ctx = multiprocessing.get_context('spawn')
  results = ctx.Queue()
  proc = ctx.Process(
    target=trainer_with_a_missing_partition, args=(str(root), free_port(), results)
  )
  proc.start()
  try:
    message, seconds = results.get(timeout=120)
  finally:
    proc.join(30)
    if proc.is_alive():
      proc.kill()
      proc.join()
  print(f'failed after {seconds:.1f} s: {message.splitlines()[0][:200]}')
  assert 'failed to start' in message and 'FileNotFoundError' in message, message
  assert seconds < 30, f'reported after {seconds:.1f} s, not at once (rpc_timeout is 60 s)'
  assert not os.path.exists(root)


CYCLES = """
import gc, os
import graphlearn_torch as glt
glt.distributed.init_worker_group(1, 0, 'cycles')
for i in range(12):
  glt.distributed.init_rpc('127.0.0.1', glt.utils.get_free_port(), 2, 20)
  glt.distributed.barrier()
  glt.distributed.shutdown_rpc()
  gc.collect()
  rss_kb = int(open('/proc/self/statm').read().split()[1]) * 4
  print('CYCLE', i, len(os.listdir('/proc/self/fd')), rss_kb, flush=True)
"""


def test_repeated_init_and_shutdown_keep_nothing():
  (out,) = finish([start(CYCLES)])
  cycles = [line.split()[1:] for line in out.splitlines() if line.startswith('CYCLE ')]
  assert len(cycles) == 12, out
  fds = [int(c[1]) for c in cycles]
  rss = [int(c[2]) for c in cycles]
  # TensorPipe opens its process-wide transports once (9 descriptors: its shm
  # memfd, event loop, pipes, sockets); after that nothing grows per cycle.
  assert len(set(fds[1:])) == 1, fds
  assert rss[-1] - rss[5] < 1024, f'RSS grew {rss[-1] - rss[5]} KB over 6 cycles'
