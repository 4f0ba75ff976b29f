"""NeighborSampler against a brute-force reference on small random graphs."""

import itertools
from collections import Counter

import numpy as np
import pytest
import torch
from conftest import random_edges
from scipy import stats

from graphlearn_torch.data import Dataset
from graphlearn_torch.sampler import NeighborSampler, NodeSamplerInput, SamplerOutput
from graphlearn_torch.sampler.base import NeighborOutput
from graphlearn_torch.sampler.hops import HopRequest, HopTrace, adjacent_views
from graphlearn_torch.sampler.schema import RandomStream, SamplingSchema
from graphlearn_torch.typing import reverse_edge_type

HOMO_T = 'n'
HOMO_E = ('n', 'e', 'n')

HETERO_COUNTS = {'paper': 40, 'author': 25, 'inst': 6}
HETERO_EDGES = {
  ('author', 'writes', 'paper'): (25, 40, 150),
  ('paper', 'cites', 'paper'): (40, 40, 200),
  ('author', 'affiliated', 'inst'): (25, 6, 30),
}


def make_hetero(edge_dir):
  edges = {
    et: random_edges(s, d, e, seed=i) for i, (et, (s, d, e)) in enumerate(HETERO_EDGES.items())
  }
  ds = Dataset(edge_dir=edge_dir)
  ds.init_graph(edges, graph_mode='CPU', num_nodes=HETERO_COUNTS)
  return ds, edges


def make_homo(edge_dir, num_nodes=50, num_edges=400, seed=0):
  ei = random_edges(num_nodes, num_nodes, num_edges, seed=seed)
  ds = Dataset(edge_dir=edge_dir)
  ds.init_graph(ei, graph_mode='CPU', num_nodes=num_nodes)
  return ds, {HOMO_E: ei}


def as_hetero(out):
  """Views a homogeneous output with the hetero output's dict fields."""
  if isinstance(out, SamplerOutput):
    return dict(
      node={HOMO_T: out.node},
      row={HOMO_E: out.row},
      col={HOMO_E: out.col},
      edge={HOMO_E: out.edge},
      num_nodes={HOMO_T: out.num_sampled_nodes},
      num_edges={HOMO_E: out.num_sampled_edges},
    )
  return dict(
    node=out.node,
    row=out.row,
    col=out.col,
    edge=out.edge,
    num_nodes=out.num_sampled_nodes,
    num_edges=out.num_sampled_edges,
  )


def check_output(out, edges, seeds, seed_type, fanouts, edge_dir, replace):
  """Checks a sampler output against the full graph ``edges`` (by brute force)."""
  o = as_hetero(out)
  # A heterogeneous output counts each type up to the last hop it appeared
  # in (GLT's layout); pad to every hop.
  num_hops = len(next(iter(fanouts.values())))
  for key, length in (('num_nodes', num_hops + 1), ('num_edges', num_hops)):
    o[key] = {t: list(c) + [0] * (length - len(c)) for t, c in o[key].items()}
  seed_pos = 0 if edge_dir == 'out' else 1
  nbr_pos = 1 - seed_pos
  # seeds first, deduplicated in order; node ids unique per type
  uniq = list(dict.fromkeys(seeds.tolist()))
  assert o['node'][seed_type][: len(uniq)].tolist() == uniq
  for t, nodes in o['node'].items():
    assert nodes.unique().numel() == nodes.numel(), f'duplicate nodes of type {t}'
    assert sum(o['num_nodes'][t]) == nodes.numel()
  node_hop_start = {t: np.cumsum([0] + list(c)) for t, c in o['num_nodes'].items()}
  for out_et, row in o['row'].items():
    orig = reverse_edge_type(out_et) if edge_dir == 'out' else out_et
    ei, eids = edges[orig], o['edge'][out_et]
    nbr_t, seed_t = out_et[0], out_et[-1]
    col = o['col'][out_et]
    assert row.numel() == col.numel() == eids.numel() == sum(o['num_edges'][out_et])
    # every sampled edge exists in the graph, in the right direction
    seed_ids, nbr_ids = o['node'][seed_t][col], o['node'][nbr_t][row]
    assert torch.equal(ei[seed_pos, eids], seed_ids)
    assert torch.equal(ei[nbr_pos, eids], nbr_ids)
    edge_start = np.cumsum([0] + list(o['num_edges'][out_et]))
    for hop, k in enumerate(fanouts[orig]):
      lo, hi = edge_start[hop], edge_start[hop + 1]
      # edges of hop h start at the nodes added in hop h
      frontier = range(node_hop_start[seed_t][hop], node_hop_start[seed_t][hop + 1])
      assert all(c in frontier for c in col[lo:hi].tolist())
      assert all(r < node_hop_start[nbr_t][hop + 2] for r in row[lo:hi].tolist())
      for c in frontier:
        v = int(o['node'][seed_t][c])
        mine = (ei[seed_pos] == v).nonzero().view(-1)
        got = eids[lo:hi][col[lo:hi] == c]
        deg = mine.numel()
        if k == -1:
          assert sorted(got.tolist()) == sorted(mine.tolist())
        elif replace:
          assert got.numel() == (k if deg else 0)
        else:
          assert got.numel() == min(k, deg)
          assert got.unique().numel() == got.numel()
        assert set(got.tolist()) <= set(mine.tolist())
  # nodes of hop h + 1 are exactly the neighbors of hop h not seen before
  for t, nodes in o['node'].items():
    for hop in range(len(o['num_nodes'][t]) - 1):
      new = set(nodes[node_hop_start[t][hop + 1] : node_hop_start[t][hop + 2]].tolist())
      seen_before = set(nodes[: node_hop_start[t][hop + 1]].tolist())
      nbrs = set()
      for out_et, row in o['row'].items():
        if out_et[0] != t:
          continue
        lo, hi = np.cumsum([0] + list(o['num_edges'][out_et]))[hop : hop + 2]
        nbrs |= set(nodes[row[lo:hi]].tolist())
      assert new == nbrs - seen_before


@pytest.mark.parametrize('edge_dir', ['out', 'in'])
@pytest.mark.parametrize('fanout,replace', [([3, 2], False), ([-1, 2], False), ([4, 3], True)])
def test_homo_against_brute_force(edge_dir, fanout, replace):
  ds, edges = make_homo(edge_dir)
  sampler = NeighborSampler(
    ds.graph, fanout, device='cpu', with_edge=True, edge_dir=edge_dir, seed=7, replace=replace
  )
  for seeds in (torch.tensor([0, 5, 9, 13]), torch.tensor([3, 3, 8]), torch.arange(50)):
    out = sampler.sample_from_nodes(NodeSamplerInput(seeds))
    assert out.num_sampled_nodes[0] == seeds.unique().numel()
    check_output(out, edges, seeds, HOMO_T, {HOMO_E: fanout}, edge_dir, replace)
    assert torch.equal(out.node[out.metadata['seed_local']], seeds)


@pytest.mark.parametrize('edge_dir', ['out', 'in'])
@pytest.mark.parametrize('replace', [False, True])
def test_hetero_against_brute_force(edge_dir, replace):
  ds, edges = make_hetero(edge_dir)
  fanouts = {et: [3, 2] for et in edges}
  fanouts[('paper', 'cites', 'paper')] = [-1, 1]
  sampler = NeighborSampler(
    ds.graph, fanouts, device='cpu', with_edge=True, edge_dir=edge_dir, seed=3, replace=replace
  )
  seed_type = 'paper' if edge_dir == 'in' else 'author'
  seeds = torch.tensor([1, 4, 4, 7, 11])
  out = sampler.sample_from_nodes(NodeSamplerInput(seeds, seed_type))
  assert out.input_type == seed_type
  for et in out.row:
    expected = reverse_edge_type(et) if edge_dir == 'out' else et
    assert expected in edges
  check_output(out, edges, seeds, seed_type, fanouts, edge_dir, replace)


def test_hetero_zero_fanout_skips_edge_type():
  ds, edges = make_hetero('in')
  fanouts = {et: [2, 2] for et in edges}
  fanouts[('author', 'writes', 'paper')] = [0, 0]
  sampler = NeighborSampler(ds.graph, fanouts, device='cpu', with_edge=True, edge_dir='in')
  out = sampler.sample_from_nodes(NodeSamplerInput(torch.arange(10), 'paper'))
  # as in GLT, types that were not sampled are left out
  assert ('author', 'writes', 'paper') not in out.row
  assert 'author' not in out.node and 'author' not in out.num_sampled_nodes
  check_output(out, edges, torch.arange(10), 'paper', fanouts, 'in', False)


def test_same_seed_same_batch_for_1_and_2_threads(thread_count):
  ds, _ = make_homo('out', num_nodes=3000, num_edges=60_000, seed=5)
  outs = []
  for threads in (1, 2, 1):
    torch.set_num_threads(threads)
    sampler = NeighborSampler(ds.graph, [10, 5], device='cpu', with_edge=True, seed=42)
    outs.append(sampler.sample_from_nodes(NodeSamplerInput(torch.arange(0, 3000, 2))))
  for other in outs[1:]:
    for field in ('node', 'row', 'col', 'edge'):
      assert torch.equal(getattr(outs[0], field), getattr(other, field))
  different = NeighborSampler(ds.graph, [10, 5], device='cpu', seed=43)
  assert not torch.equal(
    different.sample_from_nodes(NodeSamplerInput(torch.arange(0, 3000, 2))).node, outs[0].node
  )


def test_global_torch_seed_governs_unseeded_sampler():
  ds, _ = make_homo('out')
  sampler = NeighborSampler(ds.graph, [2, 2], device='cpu')
  torch.manual_seed(0)
  a = sampler.sample_from_nodes(NodeSamplerInput(torch.arange(20)))
  torch.manual_seed(0)
  b = sampler.sample_from_nodes(NodeSamplerInput(torch.arange(20)))
  assert torch.equal(a.node, b.node) and torch.equal(a.row, b.row)


def star_dataset(deg, weights=None):
  """Node 0 points at nodes 1..deg."""
  ei = torch.stack([torch.zeros(deg, dtype=torch.long), torch.arange(1, deg + 1)])
  ds = Dataset()
  ds.init_graph(ei, edge_weights=weights, graph_mode='CPU')
  return ds


def draws(ds, k, n, replace=False, with_weight=False, seed=0):
  sampler = NeighborSampler(
    ds.graph, [k], device='cpu', replace=replace, with_weight=with_weight, seed=seed
  )
  out = sampler.sample_one_hop(torch.zeros(n, dtype=torch.long), k)
  assert torch.equal(out.nbr_num, torch.full((n,), k))
  return out.nbr.view(n, k) - 1


@pytest.mark.parametrize('deg,k', [(5, 2), (6, 3)])
def test_without_replacement_subsets_are_uniform(deg, k):
  picks = draws(star_dataset(deg), k, 30_000)
  counts = Counter(tuple(sorted(r)) for r in picks.tolist())
  subsets = list(itertools.combinations(range(deg), k))
  assert set(counts) == set(subsets)
  obs = [counts[s] for s in subsets]
  assert stats.chisquare(obs).pvalue > 1e-3


@pytest.mark.parametrize('deg,k', [(50, 10), (80, 40)])  # Floyd's and shuffle paths
def test_without_replacement_inclusion_is_uniform(deg, k):
  picks = draws(star_dataset(deg), k, 20_000)
  assert all(len(set(r)) == k for r in picks[:500].tolist())
  obs = torch.bincount(picks.view(-1), minlength=deg).numpy()
  assert stats.chisquare(obs).pvalue > 1e-3


def test_with_replacement_is_uniform():
  picks = draws(star_dataset(7), 5, 20_000, replace=True)
  obs = torch.bincount(picks.view(-1), minlength=7).numpy()
  assert stats.chisquare(obs).pvalue > 1e-3


@pytest.mark.parametrize('replace', [True, False])
def test_weighted_single_draw_follows_weights(replace):
  w = torch.tensor([1.0, 2.0, 3.0, 0.0, 4.0, 10.0])
  picks = draws(star_dataset(6, w), 1, 40_000, replace=replace, with_weight=True)
  obs = torch.bincount(picks.view(-1), minlength=6).numpy()
  assert obs[3] == 0  # weight 0 is never drawn
  keep = w > 0
  expected = (w[keep] / w.sum() * 40_000).numpy()
  assert stats.chisquare(obs[keep.numpy()], expected).pvalue > 1e-3


def test_weighted_without_replacement_pairs_follow_successive_sampling():
  w = np.array([1.0, 2.0, 3.0, 4.0])
  picks = draws(star_dataset(4, torch.tensor(w, dtype=torch.float32)), 2, 40_000, with_weight=True)
  counts = Counter(tuple(sorted(r)) for r in picks.tolist())
  pairs = list(itertools.combinations(range(4), 2))
  total = w.sum()
  prob = [
    w[i] / total * w[j] / (total - w[i]) + w[j] / total * w[i] / (total - w[j]) for i, j in pairs
  ]
  obs = [counts[p] for p in pairs]
  assert stats.chisquare(obs, np.array(prob) * 40_000).pvalue > 1e-3


def test_weighted_without_replacement_takes_all_when_fanout_exceeds_degree():
  w = torch.tensor([1.0, 0.0, 2.0])
  sampler = NeighborSampler(star_dataset(3, w).graph, [5], device='cpu', with_weight=True)
  out = sampler.sample_one_hop(torch.tensor([0]), 5)
  assert sorted(out.nbr.tolist()) == [1, 3]  # the zero-weight edge is left out


def test_dense_and_hashed_inducers_agree(monkeypatch):
  import graphlearn_torch.sampler.multihop as ns

  ds, edges = make_hetero('in')
  seeds = torch.tensor([2, 9, 9, 30])
  outs = []
  for limit in (ns.DENSE_INDUCER_MAX_NODES, 0):  # id-indexed maps, then hash tables
    monkeypatch.setattr(ns, 'DENSE_INDUCER_MAX_NODES', limit)
    sampler = NeighborSampler(ds.graph, [3, 2], device='cpu', with_edge=True, edge_dir='in', seed=1)
    for _ in range(2):  # the second batch reuses the reset maps
      outs.append(sampler.sample_from_nodes(NodeSamplerInput(seeds, 'paper')))
  for dense, hashed in zip(outs[:2], outs[2:]):
    for field in ('node', 'row', 'col', 'edge'):
      for key, value in getattr(dense, field).items():
        assert torch.equal(value, getattr(hashed, field)[key])
  check_output(outs[1], edges, seeds, 'paper', {et: [3, 2] for et in edges}, 'in', False)


def test_the_inducers_in_flight_share_a_budget_of_id_indexed_maps(monkeypatch):
  # Each batch in flight holds an inducer; their id-indexed maps (4 bytes a
  # node) stay within the engine's budget, and the rest hash.
  import graphlearn_torch.sampler.multihop as ns

  ds, edges = make_homo('in')
  made, native = [], ns.ops.Inducer
  monkeypatch.setattr(
    ns.ops, 'Inducer', lambda types, sizes, *rest: made.append(sizes) or native(types, sizes, *rest)
  )
  sampler = NeighborSampler(ds.graph, [3, 2], with_edge=True, edge_dir='in', seed=1)
  engine = sampler.engine
  engine.dense_map_budget = 4 * 50  # one map of the 50 nodes
  with engine.inducer() as first, engine.inducer() as second, engine.inducer():
    assert first is not second
  assert made == [[50], [0], [0]]
  with engine.inducer() as alone:  # the id-indexed one is taken first
    assert alone is first
    with engine.inducer() as other:
      assert other is not first
  assert len(made) == 3  # reused, none made
  seeds = NodeSamplerInput(node=torch.tensor([0, 5, 9]))
  reference = NeighborSampler(ds.graph, [3, 2], with_edge=True, edge_dir='in', seed=1)
  expected = reference.sample_from_nodes(seeds)  # a pool of its own: an id-indexed map
  with engine.inducer() as busy:  # the id-indexed one in use: the batch hashes
    assert busy is first
    out = sampler.sample_from_nodes(seeds)
  for field in ('node', 'row', 'col', 'edge'):
    assert torch.equal(getattr(out, field), getattr(expected, field)), field
  check_output(out, edges, seeds.node, HOMO_T, {HOMO_E: [3, 2]}, 'in', False)


def test_a_pickled_sampler_samples_as_the_original():
  # A spawned data loader worker gets the sampler pickled: its inducer pool
  # (native maps) starts empty, its random stream where the original's was.
  import pickle

  ds, _ = make_homo('in')
  sampler = NeighborSampler(ds.graph, [3, 2], device='cpu', edge_dir='in', seed=7)
  seeds = NodeSamplerInput(node=torch.tensor([0, 5, 9]))
  sampler.sample_from_nodes(seeds)  # the pool now holds an inducer
  copy = pickle.loads(pickle.dumps(sampler))
  ours, theirs = sampler.sample_from_nodes(seeds), copy.sample_from_nodes(seeds)
  for field in ('node', 'row', 'col', 'edge'):
    a, b = getattr(ours, field), getattr(theirs, field)
    assert (a is None and b is None) or torch.equal(a, b), field


def test_hops_of_one_storage_join_without_a_copy():
  # A CPU batch's nodes, hop by hop, are adjacent views of the inducer's log:
  # they join as one view of it; anything else is concatenated.
  log = torch.arange(10)
  joined = adjacent_views([log[0:3], log[3:3], log[3:7]])
  assert joined.tolist() == list(range(7)) and joined.data_ptr() == log.data_ptr()
  assert adjacent_views([log[2:3], log[3:5]]).tolist() == [2, 3, 4]
  assert adjacent_views([log[0:3], log[4:7]]) is None  # a gap
  assert adjacent_views([log[0:3], torch.arange(3)]) is None  # another storage
  assert adjacent_views([log[0:6:2], log[6:8]]) is None  # strided
  assert adjacent_views([log[0:3]]) is None  # nothing to join


def test_a_trace_has_the_nodes_on_the_host_while_every_hop_brought_them_there():
  # A distributed batch on a GPU has each hop's new nodes on the host too:
  # the trace joins them into the batch's nodes on the host, unless a hop
  # that met new nodes left them on the device only.
  etype = ('a', 'to', 'b')
  schema = SamplingSchema([etype], {'a': 9, 'b': 9}, 'in', True)
  empty = torch.empty(0, dtype=torch.int64)
  request = HopRequest(etype, torch.tensor([0]), 2)
  answer = NeighborOutput(torch.tensor([4, 5]), torch.tensor([2]))

  def traced(hops, first=None):
    frontier = {'a': torch.tensor([7, 3]), 'b': empty}
    trace = HopTrace(schema, frontier, len(hops), empty, first)
    for hop, (new, on_host) in enumerate(hops):
      trace.add(hop, [request], [answer], new, on_host)
    return trace.result(None, {}, False).node_on_host

  first = {'a': torch.tensor([7, 3]), 'b': empty}
  met = [empty, torch.tensor([4, 5])]
  res = traced([(met, dict(a=empty, b=torch.tensor([4, 5]))), ([empty, empty], None)], first)
  assert res['a'].tolist() == [7, 3] and res['b'].tolist() == [4, 5]
  assert traced([(met, None)], first) is None  # new nodes on the device only
  assert traced([(met, dict(a=empty, b=torch.tensor([4, 5])))]) is None  # seeds not on the host


@pytest.mark.parametrize('seed', [3, None])
def test_kernel_seeds_drawn_together_are_those_drawn_one_by_one(seed):
  # Kernel seeds are drawn a hop (or a whole batch) at a time: the stream
  # must be the one a call per kernel gives.
  def stream():
    torch.manual_seed(11)  # the global generator, for an unseeded stream
    return RandomStream(seed)

  one_by_one = stream()
  expected = [one_by_one.kernel_seed() for _ in range(7)]
  together = stream()
  assert together.kernel_seeds(3) == expected[:3]
  ahead = together.kernel_seeds_ahead(4)  # drawn before it is known how many are taken
  assert ahead.seeds == expected[3:7]
  ahead.keep(2)  # the stream goes on after the 2 taken
  assert together.kernel_seeds(2) == expected[5:7]
  assert together.kernel_seeds(0) == []
  all_taken = stream()
  all_taken.kernel_seeds_ahead(5).keep(5)
  assert all_taken.kernel_seeds(2) == expected[5:7]
  none_taken = stream()
  none_taken.kernel_seeds_ahead(5).keep(0)
  assert none_taken.kernel_seeds(1) == expected[:1]


def test_a_hosts_sampling_processes_share_its_id_indexed_maps():
  # Each process of the RPC world on a host takes its share of the host's
  # budget for id-indexed maps, at most the one-process budget; a process
  # alone, or outside any distributed job, takes the one-process budget.
  from graphlearn_torch import distributed as dist
  from graphlearn_torch.distributed.runtime.context import set_context
  from graphlearn_torch.distributed.sampling import neighbor_sampler as dist_sampler
  from graphlearn_torch.sampler.multihop import DENSE_INDUCER_BUDGET_BYTES

  host = dist_sampler.HOST_DENSE_INDUCER_BUDGET_BYTES
  previous = dist.get_context()
  try:
    set_context(None)
    assert dist_sampler.dense_map_budget_on_host() == DENSE_INDUCER_BUDGET_BYTES
    ctx = dist.init_worker_group(1, 0, 'budget')
    for processes in (1, 2, 4, 8, 16):
      ctx.processes_on_host = processes
      expected = min(DENSE_INDUCER_BUDGET_BYTES, host // processes)
      assert dist_sampler.dense_map_budget_on_host() == expected
    assert host // 8 < DENSE_INDUCER_BUDGET_BYTES, '8 processes share less than one takes'
  finally:
    set_context(previous)
