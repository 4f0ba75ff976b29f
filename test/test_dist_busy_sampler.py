"""Sampling processes under pressure in worker mode: a full channel never
stalls its trainer's hand-out, a loader shut down after one batch stops at
once, a channel too small for its batches is named as the cause, a trainer
that holds its batch never deadlocks the channel, and a lagging sampling
process leaves the trainer a bounded number of early batches. The trainer
is a spawned process, reaped also on failure; batches are of 5 MB (5,000
nodes x 256 floats, 1024 seeds, fanout [10, 10])."""

import functools
import os
import resource
import time
import traceback

import pytest
import torch
from test_dist_sampling import SPAWN, free_port, run_spawned

import graphlearn_torch as glt
from graphlearn_torch.distributed.sources import sampling_process
from graphlearn_torch.partition import RandomPartitioner

# Spawned processes: left out of make test-fast.
pytestmark = pytest.mark.slow


def graph_of_5mb_batches(root) -> None:
  r"""A 5,000-node graph with 256 float features, in one partition under
  ``root`` and whole in ``root/x.pt``."""
  g = torch.Generator().manual_seed(0)
  num_nodes = 5000
  x = torch.randn(num_nodes, 256, generator=g)
  edge_index = torch.randint(0, num_nodes, (2, 50000), generator=g)
  RandomPartitioner(
    str(root), 1, num_nodes, edge_index, node_feat=x, seed=0, progress=False
  ).partition()
  torch.save(x, os.path.join(root, 'x.pt'))


def loader_of(root, port, num_batches: int, **options):
  r"""``(loader, full features, seeds)``: a worker-mode loader of ``num_batches``
  batches over the partition under ``root``, its sampling processes meeting
  at ``port`` (``options``: the rest of MpDistSamplingWorkerOptions)."""
  dist = glt.distributed
  dist.init_worker_group(1, 0, 'trainer')
  options = dist.MpDistSamplingWorkerOptions(master_addr='127.0.0.1', master_port=port, **options)
  ds = dist.DistDataset(edge_dir='out').load(root, 0, graph_mode='CPU')
  full_x = torch.load(os.path.join(root, 'x.pt'))
  g = torch.Generator().manual_seed(0)
  seeds = torch.randint(0, full_x.size(0), (1024 * num_batches,), generator=g)
  loader = dist.DistNeighborLoader(
    ds, [10, 10], seeds, batch_size=1024, worker_options=options, collect_features=True
  )
  return loader, full_x, seeds


def check_batch(batch, i: int, full_x) -> None:
  r"""Batch ``i`` of an epoch came in order, with the rows of its nodes."""
  assert torch.equal(batch.input_id, torch.arange(i * 1024, (i + 1) * 1024)), 'in order'
  assert torch.equal(batch.x, full_x[batch.node])


def check_epochs(loader, epochs: int, num_batches: int, full_x) -> None:
  r"""``epochs`` epochs of ``loader``, each of ``num_batches`` batches in
  order with their nodes' rows (each batch kept while the next is waited
  for, as a training loop keeps it)."""
  for _epoch in range(epochs):
    count = 0
    for i, batch in enumerate(loader):
      check_batch(batch, i, full_x)
      count += 1
    assert count == num_batches


def reported(run):
  r"""``run(root, port, ...)`` in a trainer process of its own: puts
  ``(0, 'ok')`` on ``results`` or the traceback of what failed; leaves the
  RPC world whichever."""

  @functools.wraps(run)
  def trainer(*args):
    *args, results = args
    try:
      run(*args)
      results.put((0, 'ok'))
    except Exception:
      results.put((0, traceback.format_exc()))
    finally:
      glt.distributed.shutdown_rpc(graceful=True, timeout=30)

  return trainer


def run_trainer(tmp_path, run, *args, timeout: float) -> None:
  r"""Runs ``run(root, port, *args)`` in a spawned trainer on
  ``graph_of_5mb_batches`` and fails with its traceback if it failed."""
  graph_of_5mb_batches(tmp_path)
  results = SPAWN.Queue()
  proc = SPAWN.Process(target=run, args=(str(tmp_path), free_port(), *args, results))
  [(rank, status)] = run_spawned([proc], results, timeout=timeout)
  assert status == 'ok', status


@reported
def run_busy_sampler(root, port):
  r"""One trainer whose sampling process runs 16 batches at once into a
  channel that holds about 6: the trainer hands out batches while the
  process waits for room in the channel."""
  options = dict(num_workers=1, worker_concurrency=16, rpc_timeout=20, channel_size='32MB')
  loader, full_x, seeds = loader_of(root, port, 60, **options)
  check_epochs(loader, 2, 60, full_x)
  loader.shutdown()
  # Shut down after one batch, the channel full behind it: the process
  # stops at once (it waited for room until it was killed, 30 s later)
  options = loader.worker_options
  loader = glt.distributed.DistNeighborLoader(
    loader.data, [10, 10], seeds, batch_size=1024, worker_options=options, collect_features=True
  )
  next(iter(loader))
  started = time.monotonic()
  loader.shutdown()
  took = time.monotonic() - started
  assert took < 10, f'a loader left after one batch took {took:.1f} s to shut down'
  # A channel that holds one batch and a half: named as the cause
  options.channel_size, options.rpc_timeout = '8MB', 4
  loader = glt.distributed.DistNeighborLoader(
    loader.data, [10, 10], seeds, batch_size=1024, worker_options=options, collect_features=True
  )
  try:
    for _batch in loader:
      pass
    raise AssertionError('a channel too small for its batches went unnoticed')
  except TimeoutError as e:
    assert 'raise channel_size' in str(e) and "the channel's 8.0 MB" in str(e), e
  loader.shutdown()


def test_a_busy_sampling_process_never_stalls_its_trainers_hand_out(tmp_path):
  # 16 batches in flight in the sampling process and 32 handed out: the
  # process's tasks wait for room that only the trainer makes, while the
  # trainer's hand-out (8 kB of seeds a batch) fills the pipe to the
  # process. Before the process read its pipe in a thread of its own, both
  # waited for ever. Then a loader shut down after one batch, and a channel
  # too small for its batches: an error that says so.
  run_trainer(tmp_path, run_busy_sampler, timeout=60)


@reported
def run_trainer_holding_its_batch(root, port):
  r"""One trainer with 2 sampling processes whose channel holds about 4
  batches and a third: each batch is kept while the next is waited for (a
  training loop's ``batch`` lives until ``next`` returns), batches that come
  early wait in the channel for their turn."""
  options = dict(num_workers=2, worker_concurrency=4, rpc_timeout=10, channel_size='22MB')
  loader, full_x, _ = loader_of(root, port, 80, **options)
  check_epochs(loader, 3, 80, full_x)
  loader.shutdown()


def test_a_trainer_holding_its_batch_never_deadlocks_the_channel(tmp_path):
  # The trainer holds the batch it yielded and, within a third of the
  # 22 MB channel, one that came early; the free rest can be split into
  # pieces each smaller than a batch. Before the loader copied its early
  # batches out when a sampling process waited for room, the due batch
  # could never be written: the trainer waited for it until the timeout.
  run_trainer(tmp_path, run_trainer_holding_its_batch, timeout=90)


def slow_in_one_process(claim_path: str, delay_s: float):
  r"""Makes the first sampling process to deliver a batch deliver each one
  ``delay_s`` late (it claims ``claim_path``); the others as before."""
  deliver = sampling_process._SampledBatches.deliver
  role = {}

  def delivered_late_in_one(self, msg, place):
    if 'slow' not in role:
      try:
        os.close(os.open(claim_path, os.O_CREAT | os.O_EXCL))
        role['slow'] = True
      except FileExistsError:
        role['slow'] = False
    if role['slow']:
      time.sleep(delay_s)  # a sampling process that lags behind the other
    deliver(self, msg, place)

  sampling_process._SampledBatches.deliver = delivered_late_in_one


@reported
def run_trainer_beside_a_slow_sampler(root, port, claim_path):
  r"""One trainer with 2 sampling processes, one of them slow: the other's
  batches come early and wait for their turn in the trainer."""
  slow_in_one_process(claim_path, 0.1)  # the sampling processes are forked from here
  options = dict(num_workers=2, worker_concurrency=4, rpc_timeout=20, channel_size='22MB')
  loader, full_x, _ = loader_of(root, port, 60, **options)
  batches = iter(loader)
  next(batches)
  peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  for i in range(1, 60):
    check_batch(next(batches), i, full_x)
  grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - peak_before
  loader.shutdown()
  assert grew < 150, f"the trainer's peak memory grew by {grew:.0f} MB"


def test_early_batches_beside_a_slow_sampler_take_at_most_a_channel(tmp_path):
  # One of the 2 sampling processes delivers every batch 0.1 s late: the
  # other's batches come early and wait in the trainer. The loader hands
  # out no more batches while those take a channel's bytes, so they take at
  # most that and those in flight (the peak grew by about 80 MB). Before,
  # it handed out up to 48 batches ahead of the batch due: the peak grew by
  # 238 MB of early batches copied out of the 22 MB channel.
  run_trainer(
    tmp_path, run_trainer_beside_a_slow_sampler, str(tmp_path / 'slow-claimed'), timeout=120
  )
