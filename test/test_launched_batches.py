"""Batches launched ahead (NeighborSampler.launch_from_nodes and
launch_from_edges, the inducer's launch_batch / finish_batch), run on the
CPU through the host harness, which has the GPU path's inducer: a launched
batch must be the batch sample_from_nodes (sample_from_edges) gives, also
with several in flight and finished in any order; each holds an inducer of
the pool until it is finished or discarded, and a discarded one leaves the
sampler's stream where it was; a failure raises at its result and leaves the
pool usable; a node or link loader that launches each batch before it
collates the one before yields the batches of one that does not."""

import pytest
import torch
from conftest import random_edges
from test_neighbor_sampler import make_hetero, make_homo
from test_whole_batch import assert_same_batch, harness_sampler

from graphlearn_torch._ext import cuda_kernels_available
from graphlearn_torch.data import Dataset
from graphlearn_torch.loader import LinkNeighborLoader, NeighborLoader
from graphlearn_torch.loader.base import LAUNCH_AHEAD_ENV
from graphlearn_torch.sampler import (
  EdgeSamplerInput,
  NegativeSampling,
  NeighborSampler,
  NodeSamplerInput,
)
from graphlearn_torch.sampler.schema import RandomStream
from graphlearn_torch.sampler.whole_batch import CUDA_GRAPHS_ENV

# Builds the host harness: left out of make test-fast.
pytestmark = pytest.mark.slow


def counted_sampler(harness, ds, fanouts, made, **options):
  """A harness sampler whose engine counts the inducers it makes in ``made``."""
  sampler = harness_sampler(harness, ds, fanouts, True, **options)
  create = sampler.engine.create_inducer

  def create_counted():
    made.append(1)
    return create()

  sampler.engine.create_inducer = create_counted
  return sampler


@pytest.mark.parametrize('hetero', [False, True])
def test_launched_batches_are_the_sampled_batches_in_any_order(harness, hetero):
  ds = make_hetero('in')[0] if hetero else make_homo('in', num_nodes=60, num_edges=500)[0]
  ntype, high = ('paper', 40) if hetero else (None, 60)
  made = []
  sampler = counted_sampler(harness, ds, [3, 2], made, with_edge=True)
  g = torch.Generator().manual_seed(3)
  inputs = [NodeSamplerInput(torch.randint(0, high, (10,), generator=g), ntype) for _ in range(4)]
  expected = [
    sampler.sample_from_nodes(x, RandomStream.for_batch(5, 0, i)) for i, x in enumerate(inputs)
  ]
  launched = [
    sampler.launch_from_nodes(x, RandomStream.for_batch(5, 0, i)) for i, x in enumerate(inputs)
  ]
  assert len(made) == 4  # each batch in flight holds an inducer of its own
  for i in (2, 0, 3, 1):
    assert_same_batch(launched[i].result(), expected[i])
  again = [
    sampler.launch_from_nodes(x, RandomStream.for_batch(5, 0, i)) for i, x in enumerate(inputs)
  ]
  assert len(made) == 4  # handed back and taken again
  for out, want in zip(again, expected):
    assert_same_batch(out.result(), want)


def test_a_batch_launched_from_the_samplers_stream_moves_it_as_sampling_does(harness):
  ds, _ = make_homo('in', num_nodes=60, num_edges=500)
  samplers = [harness_sampler(harness, ds, [3, 2], True) for _ in range(2)]
  inputs = NodeSamplerInput(torch.tensor([1, 5, 5, 17]))
  assert_same_batch(
    samplers[0].launch_from_nodes(inputs).result(), samplers[1].sample_from_nodes(inputs)
  )
  assert samplers[0].random.kernel_seed() == samplers[1].random.kernel_seed()
  # A discarded batch takes nothing from the stream.
  before = samplers[0].random.generator.get_state()
  samplers[0].launch_from_nodes(inputs).discard()
  assert torch.equal(samplers[0].random.generator.get_state(), before)


def test_a_failed_or_discarded_batch_hands_its_inducer_back(harness, monkeypatch):
  from graphlearn_torch.sampler.hops import LocalDraws

  ds, _ = make_homo('in', num_nodes=30, num_edges=200, seed=5)
  made = []
  sampler = counted_sampler(harness, ds, [3, 2], made)
  topo = ds.graph.device_topology()
  good = sampler._local_draws

  def bad_draws(random):
    bad = topo.indices.clone().fill_(31)
    return LocalDraws({etype: topo._replace(indices=bad) for etype in sampler.graphs}, random)

  monkeypatch.setattr(sampler, '_local_draws', bad_draws)
  launched = sampler.launch_from_nodes(NodeSamplerInput(torch.tensor([1, 2])))
  with pytest.raises(ValueError, match='indices holds node id 31, outside the 30 nodes'):
    launched.result()
  with pytest.raises(RuntimeError, match='finished or discarded already'):
    launched.result()
  monkeypatch.setattr(sampler, '_local_draws', good)
  sampler.launch_from_nodes(NodeSamplerInput(torch.tensor([3]))).discard()
  out = sampler.launch_from_nodes(NodeSamplerInput(torch.tensor([1, 2]))).result()
  assert out.node[:2].tolist() == [1, 2]
  assert len(made) == 1  # the one inducer, back after each


def test_the_inducer_refuses_calls_while_a_launched_batch_waits(harness):
  ds, _ = make_homo('in', num_nodes=30, num_edges=200, seed=5)
  calls = []
  sampler = harness_sampler(harness, ds, [2], True)
  create = sampler.engine.create_inducer

  class Recording:
    def __init__(self):
      self.inducer = create()

    def launch_batch(self, **plan):
      calls.append(plan)
      return self.inducer.launch_batch(**plan)

    def __getattr__(self, name):
      return getattr(self.inducer, name)

  sampler.engine.create_inducer = Recording
  sampler.launch_from_nodes(NodeSamplerInput(torch.tensor([1, 2]))).result()
  inducer = harness.Inducer(1)
  with pytest.raises(ValueError, match='finish_batch: no batch was launched'):
    inducer.finish_batch()
  inducer.launch_batch(**calls[0])
  for call in (
    lambda: inducer.launch_batch(**calls[0]),
    lambda: inducer.init_nodes([torch.tensor([1])]),
    lambda: inducer.local_ids(0, torch.tensor([1])),
  ):
    with pytest.raises(ValueError, match='launched batch was not finished'):
      call()
  nodes, *_ = inducer.finish_batch()
  assert nodes[0][:2].tolist() == [1, 2]
  inducer.launch_batch(**calls[0])
  inducer.reset()  # drops the launched batch
  with pytest.raises(ValueError, match='no batch was launched'):
    inducer.finish_batch()


def node_batches(sampler, ds):
  """A NeighborLoader over ``sampler`` and what to compare of its batches."""
  loader = NeighborLoader(
    ds, [3, 2], torch.arange(60), neighbor_sampler=sampler, batch_size=8, seed=4, device='cpu'
  )
  return loader, lambda b: (b.node, b.edge_index)


def link_batches(sampler, ds):
  """A LinkNeighborLoader over ``sampler`` (binary negatives) and what to
  compare of its batches."""
  loader = LinkNeighborLoader(
    ds, [3, 2], neighbor_sampler=sampler, neg_sampling=NegativeSampling('binary', 1),
    batch_size=40, shuffle=True, seed=4, device='cpu',
  )  # fmt: skip
  return loader, lambda b: (b.node, b.edge_index, b.edge_label_index, b.edge_label)


def loader_batches(loader, fields, epochs, stop_after=None):
  """Each epoch's batches (``fields`` of each) of ``loader``; the first
  epoch left after ``stop_after`` batches."""
  out = []
  for epoch in range(epochs):
    batches = []
    for i, batch in enumerate(loader):
      batches.append([x.clone() for x in fields(batch)])
      if epoch == 0 and stop_after is not None and i + 1 == stop_after:
        break
    out.append(batches)
  return out


@pytest.mark.parametrize('make_loader', [node_batches, link_batches], ids=['node', 'link'])
def test_a_loader_that_launches_ahead_yields_the_same_batches(harness, monkeypatch, make_loader):
  ds, _ = make_homo('in', num_nodes=60, num_edges=500)
  runs = []
  for ahead in ('1', '0'):
    monkeypatch.setenv(LAUNCH_AHEAD_ENV, ahead)
    made = []
    sampler = counted_sampler(harness, ds, [3, 2], made)
    sampler.launches_ahead = True  # as a GPU sampler's
    runs.append(loader_batches(*make_loader(sampler, ds), epochs=2, stop_after=3))
    assert len(made) == (2 if ahead == '1' else 1)  # the batch ahead's dropped at the new epoch
  for launched, one_at_a_time in zip(*runs):
    assert len(launched) == len(one_at_a_time) > 2
    for got, want in zip(launched, one_at_a_time):
      assert all(torch.equal(x, y) for x, y in zip(got, want))


def assert_same_link_batch(a, b):
  for field in ('node', 'row', 'col', 'edge', 'num_sampled_nodes', 'num_sampled_edges'):
    x, y = getattr(a, field), getattr(b, field)
    assert (x is None and y is None) or torch.equal(torch.as_tensor(x), torch.as_tensor(y)), field
  assert a.metadata.keys() == b.metadata.keys()
  for key, value in a.metadata.items():
    assert torch.equal(value, b.metadata[key]), key


def link_inputs(mode: str, count: int):
  g = torch.Generator().manual_seed(8)
  neg = NegativeSampling(mode, 2)
  return [
    EdgeSamplerInput(
      torch.randint(0, 60, (6,), generator=g),
      torch.randint(0, 60, (6,), generator=g),
      neg_sampling=neg,
    )
    for _ in range(count)
  ]


@pytest.mark.parametrize('mode', ['binary', 'triplet'])
def test_launched_link_batches_are_the_sampled_link_batches(harness, mode):
  ds, _ = make_homo('in', num_nodes=60, num_edges=500)
  made = []
  sampler = counted_sampler(harness, ds, [3, 2], made, with_edge=True)
  inputs = link_inputs(mode, 4)
  streams = [RandomStream.for_batch(5, 0, i) for i in range(len(inputs))]
  expected = [sampler.sample_from_edges(x, s) for x, s in zip(inputs, streams)]
  streams = [RandomStream.for_batch(5, 0, i) for i in range(len(inputs))]
  launched = [sampler.launch_from_edges(x, s) for x, s in zip(inputs, streams)]
  assert len(made) == 4  # each in flight holds an inducer of its own
  for i in (3, 1, 0, 2):
    assert_same_link_batch(launched[i].result(), expected[i])


def test_a_discarded_link_batch_leaves_the_stream_where_it_was(harness):
  ds, _ = make_homo('in', num_nodes=60, num_edges=500)
  samplers = [harness_sampler(harness, ds, [3, 2], True) for _ in range(2)]
  first, second = link_inputs('binary', 2)
  before = samplers[0].random.generator.get_state()
  samplers[0].launch_from_edges(first).discard()  # its negatives drawn, then given back
  assert torch.equal(samplers[0].random.generator.get_state(), before)
  assert_same_link_batch(
    samplers[0].launch_from_edges(second).result(), samplers[1].sample_from_edges(second)
  )


@pytest.mark.skipif(not cuda_kernels_available(), reason='needs a GPU and the CUDA kernels')
@pytest.mark.parametrize('graphs', ['1', '0'], ids=['cuda-graphs', 'kernel-by-kernel'])
@pytest.mark.parametrize('mode', ['CUDA', 'ZERO_COPY'])
def test_gpu_launched_batches_are_the_sampled_batches(monkeypatch, mode, graphs):
  monkeypatch.setenv(CUDA_GRAPHS_ENV, graphs)
  ds = Dataset(edge_dir='in')
  ds.init_graph(random_edges(3000, 3000, 40_000, seed=6), graph_mode=mode, num_nodes=3000)
  sampler = NeighborSampler(
    ds.graph, [10, 5, 5], device=torch.device('cuda', 0), edge_dir='in', with_edge=True, seed=3
  )
  g = torch.Generator().manual_seed(4)
  inputs = [NodeSamplerInput(torch.randint(0, 3000, (512,), generator=g)) for _ in range(6)]
  streams = [RandomStream.for_batch(9, 0, i) for i in range(len(inputs))]
  expected = [sampler.sample_from_nodes(x, s) for x, s in zip(inputs, streams)]
  for _ in range(2):  # each batch launched before the one before it is read, as a loader does
    streams = [RandomStream.for_batch(9, 0, i) for i in range(len(inputs))]
    ahead = sampler.launch_from_nodes(inputs[0], streams[0])
    for i in range(len(inputs)):
      launched = ahead
      if i + 1 < len(inputs):
        ahead = sampler.launch_from_nodes(inputs[i + 1], streams[i + 1])
      assert_same_batch(launched.result(), expected[i])


@pytest.mark.skipif(not cuda_kernels_available(), reason='needs a GPU and the CUDA kernels')
@pytest.mark.parametrize('mode', ['binary', 'triplet'])
def test_gpu_launched_link_batches_are_the_sampled_ones(mode):
  ds = Dataset(edge_dir='in')
  ds.init_graph(random_edges(3000, 3000, 40_000, seed=6), graph_mode='CUDA', num_nodes=3000)
  sampler = NeighborSampler(
    ds.graph, [10, 5], device=torch.device('cuda', 0), edge_dir='in', with_edge=True, seed=3,
    with_neg=True,
  )  # fmt: skip
  g = torch.Generator().manual_seed(4)
  neg = NegativeSampling(mode, 2)
  inputs = [
    EdgeSamplerInput(*torch.randint(0, 3000, (2, 256), generator=g), neg_sampling=neg)
    for _ in range(4)
  ]
  streams = [RandomStream.for_batch(9, 0, i) for i in range(len(inputs))]
  expected = [sampler.sample_from_edges(x, s) for x, s in zip(inputs, streams)]
  streams = [RandomStream.for_batch(9, 0, i) for i in range(len(inputs))]
  ahead = sampler.launch_from_edges(inputs[0], streams[0])
  for i in range(len(inputs)):  # each launched before the one before it is read
    launched = ahead
    if i + 1 < len(inputs):
      ahead = sampler.launch_from_edges(inputs[i + 1], streams[i + 1])
    assert_same_link_batch(launched.result(), expected[i])
