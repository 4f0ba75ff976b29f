"""A busy sampling process in worker mode: a full channel never stalls its
trainer's hand-out, a loader shut down after one batch stops at once, and a
channel too small for its batches is named as the cause. The trainer is a
spawned process, reaped also on failure."""

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


def run_busy_sampler(root, port, results):
  r"""One trainer whose sampling process runs 16 batches at once into a
  channel that holds about 6: the trainer hands out batches while the
  process waits for room in the channel."""
  dist = glt.distributed
  try:
    dist.init_worker_group(1, 0, 'trainer')
    options = dist.MpDistSamplingWorkerOptions(
      num_workers=1, worker_concurrency=16, master_addr='127.0.0.1', master_port=port,
      rpc_timeout=20, channel_size='32MB',
    )  # fmt: skip
    ds = dist.DistDataset(edge_dir='out').load(root, 0, graph_mode='CPU')
    full_x = torch.load(os.path.join(root, 'x.pt'))
    seeds = torch.randint(
      0, full_x.size(0), (1024 * 60,), generator=torch.Generator().manual_seed(0)
    )
    loader = dist.DistNeighborLoader(
      ds, [10, 10], seeds, batch_size=1024, worker_options=options, collect_features=True
    )
    for _epoch in range(2):
      count = 0
      for i, batch in enumerate(loader):
        assert torch.equal(batch.input_id, torch.arange(i * 1024, (i + 1) * 1024)), 'in order'
        assert torch.equal(batch.x, full_x[batch.node])
        count += 1
      assert count == 60
    loader.shutdown()
    # Shut down after one batch, the channel full behind it: the process
    # stops at once (it waited for room until it was killed, 30 s later)
    loader = dist.DistNeighborLoader(
      ds, [10, 10], seeds, batch_size=1024, worker_options=options, collect_features=True
    )
    next(iter(loader))
    started = time.monotonic()
    loader.shutdown()
    took = time.monotonic() - started
    assert took < 10, f'a loader left after one batch took {took:.1f} s to shut down'
    # A channel that holds one batch and a half: named as the cause
    options.channel_size, options.rpc_timeout = '8MB', 4
    loader = dist.DistNeighborLoader(
      ds, [10, 10], seeds, batch_size=1024, worker_options=options, collect_features=True
    )
    try:
      for _batch in loader:
        pass
      raise AssertionError('a channel too small for its batches went unnoticed')
    except TimeoutError as e:
      assert 'raise channel_size' in str(e) and "the channel's 8.0 MB" in str(e), e
    loader.shutdown()
    results.put((0, 'ok'))
  except Exception:
    results.put((0, traceback.format_exc()))
  finally:
    dist.shutdown_rpc(graceful=True, timeout=30)


def test_a_busy_sampling_process_never_stalls_its_trainers_hand_out(tmp_path):
  # Batches of 5 MB (5,000 nodes x 256 floats) into a 32 MB channel, 16 in
  # flight in the sampling process and 32 handed out: the process's tasks
  # wait for room that only the trainer makes, while the trainer's hand-out
  # (8 kB of seeds a batch) fills the pipe to the process. Before the
  # process read its pipe in a thread of its own, both waited for ever.
  # Then a loader shut down after one batch, and a channel too small for
  # its batches: an error that says so.
  g = torch.Generator().manual_seed(0)
  num_nodes = 5000
  x = torch.randn(num_nodes, 256, generator=g)
  edge_index = torch.randint(0, num_nodes, (2, 50000), generator=g)
  RandomPartitioner(
    str(tmp_path), 1, num_nodes, edge_index, node_feat=x, seed=0, progress=False
  ).partition()
  torch.save(x, os.path.join(tmp_path, 'x.pt'))
  results = SPAWN.Queue()
  proc = SPAWN.Process(target=run_busy_sampler, args=(str(tmp_path), free_port(), results))
  [(rank, status)] = run_spawned([proc], results, timeout=60)
  assert status == 'ok', status


def run_trainer_holding_its_batch(root, port, results):
  r"""One trainer with 2 sampling processes whose channel holds about 4
  batches and a third: each batch is kept while the next is waited for (a
  training loop's ``batch`` lives until ``next`` returns), batches that come
  early wait in the channel for their turn."""
  dist = glt.distributed
  try:
    dist.init_worker_group(1, 0, 'trainer')
    options = dist.MpDistSamplingWorkerOptions(
      num_workers=2, worker_concurrency=4, master_addr='127.0.0.1', master_port=port,
      rpc_timeout=10, channel_size='22MB',
    )  # fmt: skip
    ds = dist.DistDataset(edge_dir='out').load(root, 0, graph_mode='CPU')
    full_x = torch.load(os.path.join(root, 'x.pt'))
    seeds = torch.randint(
      0, full_x.size(0), (1024 * 80,), generator=torch.Generator().manual_seed(0)
    )
    loader = dist.DistNeighborLoader(
      ds, [10, 10], seeds, batch_size=1024, worker_options=options, collect_features=True
    )
    for _epoch in range(3):
      count = 0
      for i, batch in enumerate(loader):
        assert torch.equal(batch.input_id, torch.arange(i * 1024, (i + 1) * 1024)), 'in order'
        assert torch.equal(batch.x, full_x[batch.node])
        count += 1
      assert count == 80
    loader.shutdown()
    results.put((0, 'ok'))
  except Exception:
    results.put((0, traceback.format_exc()))
  finally:
    dist.shutdown_rpc(graceful=True, timeout=30)


def test_a_trainer_holding_its_batch_never_deadlocks_the_channel(tmp_path):
  # Batches of 5 MB into a 22 MB channel from 2 sampling processes. The
  # trainer holds the batch it yielded and, within a third of the channel,
  # one that came early; the free rest can be split into pieces each
  # smaller than a batch. Before the loader copied its early batches out
  # when a sampling process waited for room, the due batch could never be
  # written: the trainer waited for it until the timeout.
  g = torch.Generator().manual_seed(0)
  num_nodes = 5000
  x = torch.randn(num_nodes, 256, generator=g)
  edge_index = torch.randint(0, num_nodes, (2, 50000), generator=g)
  RandomPartitioner(
    str(tmp_path), 1, num_nodes, edge_index, node_feat=x, seed=0, progress=False
  ).partition()
  torch.save(x, os.path.join(tmp_path, 'x.pt'))
  results = SPAWN.Queue()
  proc = SPAWN.Process(
    target=run_trainer_holding_its_batch, args=(str(tmp_path), free_port(), results)
  )
  [(rank, status)] = run_spawned([proc], results, timeout=90)
  assert status == 'ok', status


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


def run_trainer_beside_a_slow_sampler(root, port, claim_path, results):
  r"""One trainer with 2 sampling processes, one of them slow: the other's
  batches come early and wait for their turn in the trainer."""
  dist = glt.distributed
  try:
    slow_in_one_process(claim_path, 0.1)  # the sampling processes are forked from here
    dist.init_worker_group(1, 0, 'trainer')
    options = dist.MpDistSamplingWorkerOptions(
      num_workers=2, worker_concurrency=4, master_addr='127.0.0.1', master_port=port,
      rpc_timeout=20, channel_size='22MB',
    )  # fmt: skip
    ds = dist.DistDataset(edge_dir='out').load(root, 0, graph_mode='CPU')
    full_x = torch.load(os.path.join(root, 'x.pt'))
    seeds = torch.randint(
      0, full_x.size(0), (1024 * 60,), generator=torch.Generator().manual_seed(0)
    )
    loader = dist.DistNeighborLoader(
      ds, [10, 10], seeds, batch_size=1024, worker_options=options, collect_features=True
    )
    batches = iter(loader)
    next(batches)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for i in range(1, 60):
      batch = next(batches)
      assert torch.equal(batch.input_id, torch.arange(i * 1024, (i + 1) * 1024)), 'in order'
      assert torch.equal(batch.x, full_x[batch.node])
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - peak_before
    loader.shutdown()
    assert grew < 150, f"the trainer's peak memory grew by {grew:.0f} MB"
    results.put((0, 'ok'))
  except Exception:
    results.put((0, traceback.format_exc()))
  finally:
    dist.shutdown_rpc(graceful=True, timeout=30)


def test_early_batches_beside_a_slow_sampler_take_at_most_a_channel(tmp_path):
  # Batches of 5 MB through a 22 MB channel from 2 sampling processes, one
  # 0.1 s late with every batch: the other's batches come early and wait in
  # the trainer. The loader hands out no more batches while those take a
  # channel's bytes, so they take at most that and those in flight (the
  # peak grew by about 80 MB). Before, it handed out up to 48 batches ahead
  # of the batch due: the peak grew by 238 MB of early batches copied out of
  # the channel.
  g = torch.Generator().manual_seed(0)
  num_nodes = 5000
  x = torch.randn(num_nodes, 256, generator=g)
  edge_index = torch.randint(0, num_nodes, (2, 50000), generator=g)
  RandomPartitioner(
    str(tmp_path), 1, num_nodes, edge_index, node_feat=x, seed=0, progress=False
  ).partition()
  torch.save(x, os.path.join(tmp_path, 'x.pt'))
  results = SPAWN.Queue()
  claim = str(tmp_path / 'slow-claimed')
  proc = SPAWN.Process(
    target=run_trainer_beside_a_slow_sampler, args=(str(tmp_path), free_port(), claim, results)
  )
  [(rank, status)] = run_spawned([proc], results, timeout=120)
  assert status == 'ok', status
