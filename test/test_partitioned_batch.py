"""A whole batch drawn over a host's partitions in one inducer call (the
distributed sampler's GPU path: kernels/batch_sample.h with partitions), run
on the CPU through the host harness. Each batch must equal the one the
distributed sampler's hop-by-hop driver gives: every hop answered by
the device body of sample_neighbors_partitioned (whose CPU op is checked
against sampling each partition's seeds apart and stitching) with partition p's kernel seed
mix_seed(k, p), and the random stream must stand where that run leaves it.
A bad book raises what is wrong and leaves the inducer usable."""

import pytest
import torch
from conftest import random_edges
from test_neighbor_sampler import make_hetero, make_homo
from test_whole_batch import HopByHop, harness_sampler, weighted_dataset

from graphlearn_torch._ext import cuda_kernels_available
from graphlearn_torch.data import Dataset
from graphlearn_torch.data.graph import DeviceTopology
from graphlearn_torch.sampler import NeighborSampler
from graphlearn_torch.sampler.base import NeighborOutput
from graphlearn_torch.sampler.hops import HostPartitions, LocalDraws
from graphlearn_torch.sampler.schema import RandomStream, mix_seed
from graphlearn_torch.sampler.whole_batch import CUDA_GRAPHS_ENV

# Builds the host harness: left out of make test-fast.
pytestmark = pytest.mark.slow


def owned_rows(topo: DeviceTopology, owned: torch.Tensor) -> DeviceTopology:
  """``topo`` with the entries of the rows not ``owned`` left out: a
  partition's topology, rows for every node id."""
  owned = owned.to(topo.indptr.device)
  degree = topo.indptr.diff()
  keep = torch.repeat_interleave(owned, degree)
  indptr = torch.zeros_like(topo.indptr)
  indptr[1:] = torch.cumsum(degree * owned, 0)
  weights = topo.edge_weights[keep] if topo.edge_weights is not None else None
  return DeviceTopology(indptr, topo.indices[keep], topo.edge_ids[keep], weights)


def host_partitions(sampler, num_parts: int, seed: int = 0) -> HostPartitions:
  """The sampler's graph split over ``num_parts`` partitions at random, by
  the node type of each edge type's rows."""
  g = torch.Generator().manual_seed(seed)
  schema = sampler.schema
  books = {
    t: torch.randint(0, num_parts, (schema.num_nodes[t],), generator=g) for t in schema.node_types
  }
  books = {t: b.to(torch.int8) for t, b in books.items()}  # the dtype lookup_on gives
  topologies = [
    {
      etype: owned_rows(graph.device_topology(), books[schema.seed_type(etype)] == p)
      for etype, graph in sampler.graphs.items()
    }
    for p in range(num_parts)
  ]
  return HostPartitions(topologies, books)


def whole_batch(engine, seed_dict, parts, random, **options):
  """The batch drawn over ``parts`` in one call."""
  local = LocalDraws({}, random, partitions=parts, **options)
  steps = engine.sample_steps(seed_dict, local=local)
  try:
    next(steps)
  except StopIteration as done:
    return done.value
  raise AssertionError('the engine yielded a hop to answer')


def hop_by_hop(ops, engine, seed_dict, parts, random, with_edge=False, with_weight=False):
  """The batch as the distributed sampler's driver draws it: each hop's
  kernel seeds drawn in request order, each request answered over the
  partitions with partition p's seed mix_seed(k, p) by ``ops``' (the host
  harness's: the device's kernel body, whose draws the GPU's batches have;
  or the CUDA op)."""
  steps = engine.sample_steps(seed_dict)
  try:
    requests = next(steps)
    while True:
      outs = []
      for request, k in zip(requests, random.kernel_seeds(len(requests))):
        topos = [t[request.etype] for t in parts.topologies]
        nbr, num, eid = ops.sample_neighbors_partitioned(
          [t.indptr for t in topos],
          [t.indices for t in topos],
          [t.edge_ids if with_edge else None for t in topos],
          [t.edge_weights if with_weight else None for t in topos],
          parts.books[engine.schema.seed_type(request.etype)][request.seeds],
          request.seeds,
          int(request.fanout),
          False,
          [mix_seed(k, p) for p in range(parts.num_partitions)],
        )
        outs.append(NeighborOutput(nbr, num, eid if with_edge else None))
      requests = steps.send(outs)
  except StopIteration as done:
    return done.value


def assert_same_result(a, b):
  for field in ('node', 'row', 'col', 'edge', 'seed_local'):
    x, y = getattr(a, field), getattr(b, field)
    assert (x is None) == (y is None), field
    if x is not None:
      assert x.keys() == y.keys(), field
      assert all(torch.equal(x[k], y[k]) for k in x), field
  for field in ('num_sampled_nodes', 'num_sampled_edges'):
    x, y = getattr(a, field), getattr(b, field)
    assert {k: list(v) for k, v in x.items()} == {k: list(v) for k, v in y.items()}, field


def assert_like_hop_by_hop(harness, drawn, hops, parts, seed_dicts, with_edge=False):
  """Each batch ``drawn(seed_dict, random)`` gives equals the partitioned
  hop-by-hop driver's (``hops``' engine) from the same random stream, and
  leaves the stream where that one does."""
  for i, seed_dict in enumerate(seed_dicts):
    a, b = RandomStream(10 + i), RandomStream(10 + i)
    res = drawn(seed_dict, a)
    assert_same_result(res, hop_by_hop(harness, hops.engine, seed_dict, parts, b, with_edge))
    assert a.kernel_seed() == b.kernel_seed()


def both_engines(harness, ds, fanouts, **options):
  whole = harness_sampler(harness, ds, fanouts, True, **options)
  hops = harness_sampler(harness, ds, fanouts, False, **options)
  return whole, hops


@pytest.mark.parametrize('num_parts', [1, 2, 3])
@pytest.mark.parametrize('with_edge', [False, True])
@pytest.mark.parametrize('fanouts', [[4, 3], [2, 2, 2]])
def test_homo_batches_equal_the_partitioned_hop_by_hop_driver(
  harness, threads, num_parts, with_edge, fanouts
):
  ds, _ = make_homo('in', num_nodes=60, num_edges=500, seed=3)
  whole, hops = both_engines(harness, ds, fanouts, with_edge=with_edge)
  parts = host_partitions(whole, num_parts)
  ntype = whole.schema.node_types[0]
  seeds = [torch.tensor([1, 5, 5, 17]), torch.tensor([59]), torch.arange(0, 60, 7)]

  def drawn(seed_dict, random):
    return whole_batch(whole.engine, seed_dict, parts, random, with_edge=with_edge)

  assert_like_hop_by_hop(harness, drawn, hops, parts, [{ntype: s} for s in seeds], with_edge)


def test_weighted_batches_equal_the_partitioned_hop_by_hop_driver(harness):
  whole, hops = both_engines(harness, weighted_dataset(), [3, 3], with_weight=True)
  parts = host_partitions(whole, 2, seed=5)
  seeds = {whole.schema.node_types[0]: torch.tensor([0, 8, 9, 21])}
  res = whole_batch(whole.engine, seeds, parts, RandomStream(3), with_weight=True)
  assert_same_result(
    res, hop_by_hop(harness, hops.engine, seeds, parts, RandomStream(3), with_weight=True)
  )


def test_hetero_batches_equal_the_partitioned_hop_by_hop_driver(harness, threads):
  ds, _ = make_hetero('in')
  skip_a_hop = {
    ('author', 'writes', 'paper'): [3, 0, 2],
    ('paper', 'cites', 'paper'): [2, 2, 0],
    ('author', 'affiliated', 'inst'): [0, 4, 1],
  }
  for fanouts in ([3, 2], skip_a_hop):
    whole, hops = both_engines(harness, ds, fanouts, with_edge=True)
    parts = host_partitions(whole, 3, seed=2)
    for seeds in (torch.tensor([2, 9, 9, 30]), torch.arange(40)):
      a, b = RandomStream(4), RandomStream(4)
      res = whole_batch(whole.engine, {'paper': seeds}, parts, a, with_edge=True)
      assert_same_result(res, hop_by_hop(harness, hops.engine, {'paper': seeds}, parts, b, True))
      assert a.kernel_seed() == b.kernel_seed()


def test_a_bad_book_raises_and_leaves_the_inducer_usable(harness):
  ds, _ = make_homo('in', num_nodes=30, num_edges=200, seed=5)
  whole, _ = both_engines(harness, ds, [3, 2])
  parts = host_partitions(whole, 2)
  ntype = whole.schema.node_types[0]
  inducer = harness.Inducer(1)

  def batch(seeds, book):
    local = LocalDraws(
      {}, RandomStream(1), partitions=HostPartitions(parts.topologies, {ntype: book})
    )
    steps = whole.engine.sample_steps({ntype: seeds}, inducer, local)
    with pytest.raises(StopIteration) as done:
      next(steps)
    return done.value.value

  bad = parts.books[ntype].clone()
  bad[4] = 2
  with pytest.raises(ValueError, match='gives node 4 partition 2, outside the 2 partitions'):
    batch(torch.tensor([1, 4]), bad)
  with pytest.raises(ValueError, match='has 29 entries for 30 nodes'):
    batch(torch.tensor([1]), parts.books[ntype][:29])
  with pytest.raises(ValueError, match='1-D integer tensor'):
    batch(torch.tensor([1]), parts.books[ntype].float())
  res = batch(torch.tensor([1, 4]), parts.books[ntype])  # usable after every failure
  assert res.node[ntype][:2].tolist() == [1, 4]


def test_partitions_need_a_whole_batch(harness):
  ds, _ = make_homo('in', num_nodes=30, num_edges=200, seed=5)
  whole, _ = both_engines(harness, ds, [3, -1])  # all neighbors: no bound ahead
  parts = host_partitions(whole, 2)
  local = LocalDraws({}, RandomStream(1), partitions=parts)
  with pytest.raises(ValueError, match='drawn a whole batch at once'):
    next(whole.engine.sample_steps({whole.schema.node_types[0]: torch.tensor([1])}, local=local))


def test_hop_by_hop_inducer_is_refused_partitions(harness):
  ds, _ = make_homo('in', num_nodes=30, num_edges=200, seed=5)
  _, hops = both_engines(harness, ds, [3, 2])
  parts = host_partitions(hops, 2)
  local = LocalDraws({}, RandomStream(1), partitions=parts)
  inducer = HopByHop(harness.Inducer(1))
  steps = hops.engine.sample_steps({hops.schema.node_types[0]: torch.tensor([1])}, inducer, local)
  with pytest.raises(ValueError, match='drawn a whole batch at once'):
    next(steps)


def on_gpu(parts: HostPartitions) -> HostPartitions:
  device = torch.device('cuda', 0)
  topologies = [
    {
      e: DeviceTopology(*(t.to(device) if t is not None else None for t in topo))
      for e, topo in p.items()
    }
    for p in parts.topologies
  ]
  return HostPartitions(topologies, {t: b.to(device) for t, b in parts.books.items()})


@pytest.mark.skipif(not cuda_kernels_available(), reason='needs a GPU and the CUDA kernels')
@pytest.mark.parametrize('graphs', ['1', '0'], ids=['cuda-graphs', 'kernel-by-kernel'])
def test_gpu_batches_equal_the_partitioned_hop_by_hop_driver(monkeypatch, graphs):
  # On the GPU: the CudaInducer's batch over 3 partitions against the
  # distributed driver's hops, each the CUDA sample_neighbors_partitioned.
  monkeypatch.setenv(CUDA_GRAPHS_ENV, graphs)
  ds = Dataset(edge_dir='in')
  ds.init_graph(random_edges(3000, 3000, 40_000, seed=6), graph_mode='CUDA', num_nodes=3000)
  cuda = torch.device('cuda', 0)
  whole, hops = (
    NeighborSampler(ds.graph, [10, 5, 5], device=cuda, edge_dir='in', with_edge=True, seed=3)
    for _ in range(2)
  )
  parts = on_gpu(host_partitions(whole, 3, seed=1))
  g = torch.Generator().manual_seed(4)
  ntype = whole.schema.node_types[0]
  for i in range(3):  # the second and third of one shape replay a CUDA graph
    seeds = {ntype: torch.randint(0, 3000, (512,), generator=g).to(cuda)}
    a, b = RandomStream(i), RandomStream(i)
    res = whole_batch(whole.engine, seeds, parts, a, with_edge=True)
    assert_same_result(res, hop_by_hop(torch.ops.glt, hops.engine, seeds, parts, b, True))
    assert a.kernel_seed() == b.kernel_seed()
