"""Leaving an RPC world: rank 0 serves the rendezvous store that torch's
graceful shutdown reads to the end, so it goes only after every other rank
has said it left (a rank 0 gone first cuts a slower rank's last read: a C++
"Connection reset by peer" in its log), and not much later when one never
says so; a graceful shutdown beside a rank that died raises at once, where
the ranks' wait for each other would last the whole timeout, and beside a
live one waits for it: a trainer done first keeps serving its partition to
the other's sampling processes. Processes are spawned on loopback and reaped
also on failure."""

import os
import time
import traceback

import pytest
import torch
from event_pipes import EventPipes
from test_dist_sampling import (
  free_port,
  make_loader,
  partition,
  run_epochs,
  run_spawned,
  share_host_partitions,
)
from test_job_identity import SPAWN, reap, start

import graphlearn_torch as glt
from graphlearn_torch.distributed.runtime import rpc as rpc_module
from graphlearn_torch.distributed.runtime.rendezvous import LEAVE_WAIT_S

# Spawned processes: left out of make test-fast.
pytestmark = pytest.mark.slow

RPC_TIMEOUT_S = 20
SLOW_LEAVE_S = 1.5


def member(rank, port, leaves, events):
  r"""A rank of a 2-process world that joins and leaves gracefully; rank 1
  leaves ``SLOW_LEAVE_S`` late (``leaves='late'``) or never says it left
  (``'silently'``). Reports when it starts to say so, and when it is out."""
  dist = glt.distributed
  try:
    dist.init_worker_group(2, rank, 'leave')
    dist.init_rpc('127.0.0.1', port, num_rpc_threads=2, rpc_timeout=RPC_TIMEOUT_S)
    say_left = rpc_module.leave_rendezvous

    def leave(name, graceful):
      if rank == 1 and leaves == 'late':
        time.sleep(SLOW_LEAVE_S)  # a rank slow to make its last read of the store
      events.put(('leaving', rank, time.time()))
      if rank == 0 or leaves != 'silently':
        say_left(name, graceful)

    rpc_module.leave_rendezvous = leave
    dist.shutdown_rpc(graceful=True, timeout=RPC_TIMEOUT_S)
    events.put(('out', rank, time.time()))
  except Exception:
    events.put(('error', rank, traceback.format_exc()))


def run_world(leaves):
  r"""``{(kind, rank): time}`` of a world whose rank 1 leaves as ``leaves``."""
  port, events = free_port(), EventPipes()
  procs = [start(member, r, port, leaves, events.writer()) for r in (0, 1)]
  try:
    return {
      (kind, rank): events.wait(kind, rank, failures=('error',))
      for kind in ('leaving', 'out')
      for rank in (0, 1)
    }  # fmt: skip
  finally:
    reap(procs)


def test_rank_0_leaves_after_the_others():
  times = run_world('late')
  assert times['out', 0] >= times['leaving', 1], 'rank 0 went before rank 1 said it left'
  assert times['out', 0] - times['leaving', 1] < LEAVE_WAIT_S


def test_rank_0_waits_a_bounded_time_for_a_rank_that_never_says_it_left():
  times = run_world('silently')
  waited = times['out', 0] - times['leaving', 0]
  assert LEAVE_WAIT_S - 0.5 <= waited < LEAVE_WAIT_S + 5, waited


def member_beside_the_dead(rank, port, died, events):
  r"""A rank of a 3-process world: rank 2 exits without leaving once every
  rank has joined; ranks 0 and 1 then (``died`` set) leave gracefully and
  report how long that took and what it raised."""
  dist = glt.distributed
  try:
    dist.init_worker_group(3, rank, 'leave')
    dist.init_rpc('127.0.0.1', port, num_rpc_threads=2, rpc_timeout=RPC_TIMEOUT_S)
    dist.barrier()
    if rank == 2:
      os._exit(0)  # no shutdown: as a killed process
    if not died.wait(RPC_TIMEOUT_S):
      raise TimeoutError('rank 2 did not exit')
    started = time.monotonic()
    try:
      dist.shutdown_rpc(graceful=True, timeout=RPC_TIMEOUT_S)
      raised = None
    except RuntimeError as e:
      raised = str(e)
    events.put(('left', rank, (time.monotonic() - started, raised)))
  except Exception:
    events.put(('error', rank, traceback.format_exc()))


def test_a_graceful_leave_beside_a_dead_rank_raises_at_once():
  port, events, died = free_port(), EventPipes(), SPAWN.Event()
  procs = [start(member_beside_the_dead, r, port, died, events.writer()) for r in (0, 1, 2)]
  try:
    procs[2].join(RPC_TIMEOUT_S)
    assert procs[2].exitcode == 0, 'rank 2 exits once every rank has joined'
    died.set()
    for rank in (0, 1):
      took, raised = events.wait('left', rank, failures=('error',))
      assert raised is not None and 'leave_2' in raised, raised
      assert took < 5, f'rank {rank} took {took:.1f} s to leave beside a dead rank'
  finally:
    reap(procs)


def trainer_of_its_own_epochs(rank, port, sampling_port, root, epochs, results):
  r"""A worker-mode trainer of 2, the other partition read over RPC by its
  sampling process: checks ``epochs`` epochs of batches against the whole
  graph, then shuts its loader down; reports when that started and ended."""
  share_host_partitions('0', rank, 2)
  dist = glt.distributed
  try:
    dist.init_worker_group(2, rank, 'trainer')
    dist.init_rpc('127.0.0.1', port, num_rpc_threads=2, rpc_timeout=RPC_TIMEOUT_S)
    options = dist.MpDistSamplingWorkerOptions(
      num_workers=1, master_addr='127.0.0.1', master_port=sampling_port,
      rpc_timeout=RPC_TIMEOUT_S, channel_size='16MB',
    )  # fmt: skip
    ds = dist.DistDataset(edge_dir='out').load(root, rank, graph_mode='CPU')
    graph = torch.load(os.path.join(root, 'full.pt'), weights_only=False)
    loader, num_seeds, check = make_loader(dist, ds, graph, 'node', False, rank, options)
    batches, _ = run_epochs(loader, check, num_seeds, epochs)
    started = time.monotonic()
    loader.shutdown()
    results.put((rank, 'ok', batches, started, time.monotonic()))
  except Exception:
    results.put((rank, traceback.format_exc(), 0, 0.0, 0.0))
  finally:
    dist.shutdown_rpc(graceful=True, timeout=RPC_TIMEOUT_S)


def test_a_trainer_done_first_serves_the_other_until_it_is_done(tmp_path):
  partition(str(tmp_path), 2, hetero=False)
  results, ports = SPAWN.Queue(), (free_port(), free_port())
  procs = [
    SPAWN.Process(
      target=trainer_of_its_own_epochs, args=(rank, *ports, str(tmp_path), epochs, results)
    )
    for rank, epochs in ((0, 1), (1, 12))
  ]
  reports = dict((r[0], r[1:]) for r in run_spawned(procs, results, timeout=120))
  for rank, (status, *_) in reports.items():
    assert status == 'ok', f'rank {rank}:\n{status}'
  (_, batches_0, _, done_0), (_, batches_1, stop_1, _) = reports[0], reports[1]
  assert batches_1 > 6 * batches_0, 'the second trainer ran on after the first was done'
  assert done_0 >= stop_1, "the first trainer's samplers left before the second's"
