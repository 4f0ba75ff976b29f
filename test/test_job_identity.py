"""Two jobs at the same master address and port do not mix: a process of
another job (a second run of the same script while the first runs, or a
different GLT_JOB_ID) is refused with an error naming both jobs, and the
running job goes on undisturbed. Processes are spawned on loopback and
reaped also on failure."""

import os
import traceback

import pytest
from event_pipes import EventPipes
from test_dist_sampling import SPAWN, free_port

import graphlearn_torch as glt

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

RPC_TIMEOUT_S = 20


def member(rank, port, job_id, events, proceed):
  r"""A rank of a 2-process job: joins, says so, waits for ``proceed``, then
  proves its job works (an all-gather) and leaves."""
  dist = glt.distributed
  if job_id:
    os.environ['GLT_JOB_ID'] = job_id
  try:
    dist.init_worker_group(2, rank, 'job-a')
    dist.init_rpc('127.0.0.1', port, num_rpc_threads=2, rpc_timeout=RPC_TIMEOUT_S)
    events.put(('joined', rank, None))
    proceed.recv()
    events.put(('gathered', rank, dist.all_gather(rank, timeout=RPC_TIMEOUT_S)))
    dist.shutdown_rpc(graceful=True, timeout=RPC_TIMEOUT_S)
  except Exception:
    events.put(('error', rank, traceback.format_exc()))


def intruder(port, job_id, events):
  r"""Rank 1 of another 2-process job at the same port."""
  dist = glt.distributed
  if job_id:
    os.environ['GLT_JOB_ID'] = job_id
  try:
    dist.init_worker_group(2, 1, 'job-b')
    dist.init_rpc('127.0.0.1', port, num_rpc_threads=2, rpc_timeout=RPC_TIMEOUT_S)
    events.put(('joined', 9, None))
  except Exception as e:
    events.put(('refused', 9, f'{type(e).__name__}: {e}'))


def start(target, *args):
  proc = SPAWN.Process(target=target, args=args)
  proc.start()
  return proc


def reap(procs):
  for proc in procs:
    proc.join(RPC_TIMEOUT_S)
    if proc.is_alive():
      proc.kill()
      proc.join()


def test_a_second_run_cannot_join_a_running_job():
  port, events = free_port(), EventPipes()
  gates = [SPAWN.Pipe(duplex=False) for _ in range(2)]
  procs = [start(member, r, port, None, events.writer(), gates[r][0]) for r in (0, 1)]
  try:
    for rank in (0, 1):
      events.wait('joined', rank, failures=('error',))
    procs.append(start(intruder, port, None, events.writer()))
    message = events.wait('refused', 9, failures=('joined',))
    assert 'belongs to the job of' in message and 'which is running' in message, message
    assert 'test_job_identity' in message or 'pid' in message, 'both jobs are named'
    for _, gate in gates:
      gate.send('go')
    for rank in (0, 1):
      assert events.wait('gathered', rank, failures=('error',)) == [0, 1], 'job a goes on'
  finally:
    reap(procs)


def test_another_job_id_is_refused_during_the_rendezvous():
  port, events = free_port(), EventPipes()
  gates = [SPAWN.Pipe(duplex=False) for _ in range(2)]
  procs = [start(member, 0, port, 'job-a-7', events.writer(), gates[0][0])]
  try:
    # rank 0 of job a waits for its rank 1; rank 1 of job b arrives first
    procs.append(start(intruder, port, 'job-b-8', events.writer()))
    message = events.wait('refused', 9, failures=('joined', 'error'))
    assert "job 'job-b-8'" in message and "job 'job-a-7'" in message, message
    procs.append(start(member, 1, port, 'job-a-7', events.writer(), gates[1][0]))
    for rank in (0, 1):
      events.wait('joined', rank, failures=('error',))
    for _, gate in gates:
      gate.send('go')
    for rank in (0, 1):
      assert events.wait('gathered', rank, failures=('error',)) == [0, 1]
  finally:
    reap(procs)
