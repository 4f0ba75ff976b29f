"""A whole batch drawn in one inducer call (kernels/batch_sample.h, the GPU
path's sample_batch), run on the CPU through the host harness: the engine's
batches must equal those of the same inducer driven hop by hop
(sample_induce_next, itself checked against the kernels' sample_neighbors
then induce_next), for homogeneous and heterogeneous graphs, and the random
stream must stand where the hop-by-hop run leaves it. A bad input raises
what is wrong and leaves the inducer usable."""

import pytest
import torch
from conftest import random_edges
from test_neighbor_sampler import HOMO_T, check_output, make_hetero, make_homo

from graphlearn_torch._ext import cuda_kernels_available
from graphlearn_torch.data import Dataset
from graphlearn_torch.sampler import NeighborSampler, NodeSamplerInput

# Builds the host harness: left out of make test-fast.
pytestmark = pytest.mark.slow


class HopByHop:
  """An inducer without sample_batch: the engine then drives it hop by hop."""

  def __init__(self, inducer):
    self.inducer = inducer

  def __getattr__(self, name):
    if name == 'sample_batch':
      raise AttributeError(name)
    return getattr(self.inducer, name)


def inducer_sampler(make_inducer, ds, fanouts, whole, **options):
  """A NeighborSampler on ``ds`` whose engine's inducers are
  ``make_inducer(num_node_types)`` (None: the engine's own), whole batches
  at a time or hop by hop."""
  sampler = NeighborSampler(ds.graph, fanouts, device='cpu', edge_dir='in', seed=7, **options)
  num_types = len(sampler.schema.node_types)
  own = sampler.engine.create_inducer

  def create_inducer():
    inducer = make_inducer(num_types) if make_inducer is not None else own()
    return inducer if whole else HopByHop(inducer)

  sampler.engine.create_inducer = create_inducer
  return sampler


def harness_sampler(harness, ds, fanouts, whole, **options):
  """``inducer_sampler`` with the harness's inducer."""
  return inducer_sampler(harness.Inducer, ds, fanouts, whole, **options)


def assert_same_batch(a, b):
  for field in ('node', 'row', 'col', 'edge', 'batch', 'num_sampled_nodes', 'num_sampled_edges'):
    x, y = getattr(a, field), getattr(b, field)
    if isinstance(x, dict):
      assert x.keys() == y.keys(), field
      for key in x:
        assert torch.equal(torch.as_tensor(x[key]), torch.as_tensor(y[key])), (field, key)
    elif x is None or y is None:
      assert x is None and y is None, field
    else:
      assert torch.equal(torch.as_tensor(x), torch.as_tensor(y)), field
  assert torch.equal(a.metadata['seed_local'], b.metadata['seed_local'])


def sample_both(make_inducer, ds, fanouts, batches, seed_type=None, **options):
  """The same batches from a whole-batch and a hop-by-hop sampler of
  ``make_inducer``'s inducers (see ``inducer_sampler``)."""
  whole = inducer_sampler(make_inducer, ds, fanouts, True, **options)
  hops = inducer_sampler(make_inducer, ds, fanouts, False, **options)
  outs = []
  for seeds in batches:
    inputs = NodeSamplerInput(seeds, seed_type)
    outs.append((whole.sample_from_nodes(inputs), hops.sample_from_nodes(inputs)))
  # Both streams stand at the same place: the next draws agree.
  assert whole.random.kernel_seed() == hops.random.kernel_seed()
  return outs


def check_homo_batches(make_inducer, with_edge, replace, fanouts):
  """Whole batches of ``make_inducer``'s inducers (``inducer_sampler``) on
  a homogeneous graph are the hop-by-hop engine's, and the brute force's."""
  ds, edges = make_homo('in', num_nodes=60, num_edges=500, seed=3)
  batches = [torch.tensor([1, 5, 5, 17]), torch.tensor([59]), torch.arange(0, 60, 7)]
  outs = sample_both(make_inducer, ds, fanouts, batches, with_edge=with_edge, replace=replace)
  for (whole, hops), seeds in zip(outs, batches):
    assert_same_batch(whole, hops)
    if with_edge:  # the brute-force check reads the edge ids
      check_output(whole, edges, seeds, HOMO_T, {et: fanouts for et in edges}, 'in', replace)


SOME_TYPES_SKIP_A_HOP = {
  ('author', 'writes', 'paper'): [3, 0, 2],
  ('paper', 'cites', 'paper'): [2, 2, 0],
  ('author', 'affiliated', 'inst'): [0, 4, 1],
}


def check_hetero_batches(make_inducer, fanouts):
  """``check_homo_batches`` on a heterogeneous graph, with edge ids."""
  ds, edges = make_hetero('in')
  batches = [torch.tensor([2, 9, 9, 30]), torch.tensor([0]), torch.arange(40)]
  outs = sample_both(make_inducer, ds, fanouts, batches, 'paper', with_edge=True)
  per_type = fanouts if isinstance(fanouts, dict) else {et: fanouts for et in edges}
  for (whole, hops), seeds in zip(outs, batches):
    assert_same_batch(whole, hops)
    check_output(whole, edges, seeds, 'paper', per_type, 'in', False)


HOMO_CASES = pytest.mark.parametrize(
  'with_edge, replace, fanouts',
  [
    (e, r, f)
    for e in (False, True)
    for r in (False, True)
    for f in ([4, 3], [2, 2, 2, 2], [5, 1, 6])
  ],
)
HETERO_CASES = pytest.mark.parametrize('fanouts', [[3, 2], SOME_TYPES_SKIP_A_HOP])


@HOMO_CASES
def test_homo_batches_equal_the_hop_by_hop_engine(harness, threads, with_edge, replace, fanouts):
  check_homo_batches(harness.Inducer, with_edge, replace, fanouts)


@HETERO_CASES
def test_hetero_batches_equal_the_hop_by_hop_engine(harness, threads, fanouts):
  check_hetero_batches(harness.Inducer, fanouts)


class PlanCounter:
  """An inducer that counts its batches' planned requests and those that drew."""

  def __init__(self, inducer, counts):
    self.inducer, self.counts = inducer, counts

  def sample_batch(self, **plan):
    out = self.inducer.sample_batch(**plan)
    self.counts.append((plan['plan'].num_requests, int(out[-1][-1])))
    return out

  def __getattr__(self, name):
    return getattr(self.inducer, name)


def test_a_frontier_that_comes_out_empty_takes_no_random_key(harness):
  # Papers no paper cites: hop 1 meets authors but no new paper, so hop 2's
  # 'writes' request (its bound: hop 1's cites draws) has no seeds; it must
  # neither draw nor take a kernel seed, as the hop-by-hop engine skips it.
  edges = {
    ('author', 'writes', 'paper'): random_edges(25, 40, 150, seed=0),
    ('paper', 'cites', 'paper'): random_edges(40, 20, 100, seed=1),  # papers 20+ uncited
  }
  ds = Dataset(edge_dir='in')
  ds.init_graph(edges, graph_mode='CPU', num_nodes={'paper': 40, 'author': 25})
  uncited = torch.arange(20, 40)
  cites = {et: [2, 2] for et in edges}
  counts = []
  whole = harness_sampler(harness, ds, cites, True, with_edge=True)
  make = whole.engine.create_inducer
  whole.engine.create_inducer = lambda: PlanCounter(make(), counts)
  hops = harness_sampler(harness, ds, cites, False, with_edge=True)
  for seeds in (uncited[:2], uncited[-1:], torch.tensor([0, 1, 2])):
    inputs = NodeSamplerInput(seeds, 'paper')
    assert_same_batch(whole.sample_from_nodes(inputs), hops.sample_from_nodes(inputs))
  assert any(drawn < planned for planned, drawn in counts), counts
  assert whole.random.kernel_seed() == hops.random.kernel_seed()


class PlanMaker:
  """An inducer that counts the BatchPlans made with it."""

  def __init__(self, inducer, made):
    self.inducer, self.made = inducer, made

  def BatchPlan(self, **fixed):  # noqa: N802  (the inducer's class)
    self.made.append(fixed)
    return self.inducer.BatchPlan(**fixed)

  def __getattr__(self, name):
    return getattr(self.inducer, name)


def test_a_sampler_plans_its_batches_once_per_topology(harness):
  # Each batch hands the inducer its seeds and keys alone; other topology
  # tensors (a graph placed again, say) get a plan of their own, which
  # replaces the one before (holding its tensors no longer).
  ds, edges = make_homo('in', num_nodes=60, num_edges=500, seed=3)
  made = []
  sampler = harness_sampler(harness, ds, [3, 2], True, with_edge=True)
  create = sampler.engine.create_inducer
  sampler.engine.create_inducer = lambda: PlanMaker(create(), made)
  fanouts = {et: [3, 2] for et in edges}
  for seeds in (torch.tensor([1, 2]), torch.tensor([7]), torch.tensor([4, 5, 6])):
    out = sampler.sample_from_nodes(NodeSamplerInput(seeds))
    check_output(out, edges, seeds, HOMO_T, fanouts, 'in', False)
  assert len(made) == 1
  assert made[0]['fanouts'] == [3, 2] and made[0]['hops'] == [0, 1]
  graph = ds.graph
  placed = graph.device_topology()._replace(indptr=graph.device_topology().indptr.clone())
  graph.device_topology = lambda: placed
  seeds = torch.tensor([1, 2])
  out = sampler.sample_from_nodes(NodeSamplerInput(seeds))
  assert len(made) == 2 and made[1]['indptrs'][0] is placed.indptr
  check_output(out, edges, seeds, HOMO_T, fanouts, 'in', False)
  del graph.device_topology  # back to the first: only the last plan is kept
  sampler.sample_from_nodes(NodeSamplerInput(seeds))
  assert len(made) == 3


class PlanRecorder:
  """An inducer that keeps the arguments and results of its sample_batch calls."""

  def __init__(self, inducer, calls):
    self.inducer, self.calls = inducer, calls

  def sample_batch(self, **plan):
    out = self.inducer.sample_batch(**plan)
    self.calls.append((plan, out))
    return out

  def __getattr__(self, name):
    return getattr(self.inducer, name)


@pytest.mark.parametrize('hetero', [False, True])
def test_a_batch_launched_again_with_new_seeds_is_that_batch(harness, hetero):
  # What a CUDA graph's replay does: the same buffers and launches, the
  # seeds and keys copied in; nothing of the batch before may remain.
  ds = make_hetero('in')[0] if hetero else make_homo('in', num_nodes=60, num_edges=500)[0]
  calls = []
  sampler = harness_sampler(harness, ds, [3, 2], True, with_edge=True)
  make = sampler.engine.create_inducer
  sampler.engine.create_inducer = lambda: PlanRecorder(make(), calls)
  g = torch.Generator().manual_seed(8)
  for _ in range(4):  # seed sets of one size, duplicates among them
    seeds = torch.randint(0, 40 if hetero else 60, (12,), generator=g)
    sampler.sample_from_nodes(NodeSamplerInput(seeds, 'paper' if hetero else None))
  (first, _), *more = calls
  relaunched = harness.sample_batches_relaunched(
    **{k: v for k, v in first.items() if k != 'replay'},
    more_seeds=[plan['seeds'] for plan, _ in more],
    more_keys=[plan['rng_seeds'] for plan, _ in more],
  )
  assert len(relaunched) == len(calls)
  for again, (_, out) in zip(relaunched, calls):
    for part_again, part in zip(again, out):
      if isinstance(part, list):
        assert all(torch.equal(a, b) for a, b in zip(part_again, part))
      else:
        assert torch.equal(part_again, part)


def weighted_dataset() -> Dataset:
  """40 nodes, 300 weighted edges, every fifth of weight 0 (never drawn)."""
  ei = random_edges(40, 40, 300, seed=4)
  weights = torch.rand(300, generator=torch.Generator().manual_seed(1)) + 0.1
  weights[::5] = 0.0
  ds = Dataset(edge_dir='in')
  ds.init_graph(ei, edge_weights=weights, graph_mode='CPU', num_nodes=40)
  return ds


def test_weighted_batches_equal_the_hop_by_hop_engine(harness):
  ds = weighted_dataset()
  for replace in (False, True):
    outs = sample_both(
      harness.Inducer, ds, [3, 3], [torch.tensor([0, 8, 9])], with_weight=True, replace=replace
    )
    assert_same_batch(*outs[0])


def test_bad_inputs_raise_and_leave_the_inducer_usable(harness):
  from graphlearn_torch.sampler.hops import LocalDraws
  from graphlearn_torch.sampler.schema import RandomStream

  ds, _ = make_homo('in', num_nodes=30, num_edges=200, seed=5)
  sampler = harness_sampler(harness, ds, [3, 2], True)
  inducer = harness.Inducer(1)
  topo = ds.graph.device_topology()
  local = LocalDraws({etype: topo for etype in sampler.graphs}, RandomStream(1))

  def batch(seeds, **patch):
    topos = {etype: topo._replace(**patch) for etype in sampler.graphs}
    draws = LocalDraws(topos, local.random)
    steps = sampler.engine.sample_steps({sampler.schema.node_types[0]: seeds}, inducer, draws)
    try:
      next(steps)
    except StopIteration as done:
      return done.value
    raise AssertionError('the engine yielded a hop to answer')

  with pytest.raises(ValueError, match='seeds hold node id 30, outside the 30 nodes'):
    batch(torch.tensor([1, 30]))
  with pytest.raises(ValueError, match='seeds hold node id -2'):
    batch(torch.tensor([-2, 3]))
  bad = topo.indices.clone()
  bad[:] = 31
  with pytest.raises(ValueError, match='indices holds node id 31, outside the 30 nodes'):
    batch(torch.tensor([1, 2]), indices=bad)
  bad[:] = -4
  with pytest.raises(ValueError, match='indices holds node id -4, outside the 30 nodes'):
    batch(torch.tensor([1, 2]), indices=bad)
  bad_ptr = topo.indptr.clone()
  bad_ptr[2] = 10_000
  with pytest.raises(ValueError, match='indptr gives row 1 entries outside indices'):
    batch(torch.tensor([1]), indptr=bad_ptr)
  res = batch(torch.tensor([1, 2]))  # usable after every failure
  assert res.node[sampler.schema.node_types[0]][:2].tolist() == [1, 2]


@pytest.mark.skipif(not cuda_kernels_available(), reason='needs a GPU and the CUDA kernels')
@pytest.mark.parametrize('mode', ['CUDA', 'ZERO_COPY'])
def test_gpu_batches_equal_the_hop_by_hop_engine(mode):
  ds = Dataset(edge_dir='in')
  ds.init_graph(random_edges(3000, 3000, 40_000, seed=6), graph_mode=mode, num_nodes=3000)
  samplers = []
  for whole in (True, False):
    sampler = NeighborSampler(
      ds.graph, [10, 5, 5], device=torch.device('cuda', 0), edge_dir='in', with_edge=True, seed=3
    )
    if not whole:
      make = sampler.engine.create_inducer
      sampler.engine.create_inducer = lambda make=make: HopByHop(make())
    samplers.append(sampler)
  g = torch.Generator().manual_seed(4)
  for _ in range(3):
    inputs = NodeSamplerInput(torch.randint(0, 3000, (512,), generator=g))
    assert_same_batch(*(s.sample_from_nodes(inputs) for s in samplers))


def test_a_batch_launches_six_kernels_a_hop(harness):
  # The kernels of a whole batch of one node and edge type (the CUDA graph a
  # batch replays): one to empty the table; the seeds' range check and
  # insert (claim, first, number and local ids, and a last thread that counts
  # them and marks the hop's end); per hop the counts (and the key taken),
  # the draws' positions, their neighbors (each claiming its slot), and the
  # insert (first, number and local ids, and the last thread: the counts,
  # the request's total and its edge type's, the hop's end). The prefix sums
  # and the state's copy are torch's, besides.
  ds, _ = make_homo('in', num_nodes=60, num_edges=500)
  sampler = harness_sampler(harness, ds, [4, 3, 2], True)
  inputs = NodeSamplerInput(torch.tensor([1, 5, 17]))
  sampler.sample_from_nodes(inputs)
  before = harness.launches()
  sampler.sample_from_nodes(inputs)
  assert harness.launches() - before == 1 + 5 + 3 * 6
