"""Temporal, disjoint, induced and bidirectional sampling (PyG's semantics) in
NeighborSampler and our loaders, against brute force on small graphs: no
node or edge later than its seed, 'last' exactly the k latest, fanout -1 the
whole allowed k-hop ball, 'uniform' uniform (chi-square), disjoint equal to
each seed sampled alone, induced every edge among the sampled nodes."""

from collections import Counter

import numpy as np
import pytest
import torch
from scipy import stats

import graphlearn_torch as glt
from graphlearn_torch._ext import cuda_kernels_available
from graphlearn_torch.data import Graph, Topology
from graphlearn_torch.sampler import NeighborSampler, NodeSamplerInput
from graphlearn_torch.sampler.base import EdgeSamplerInput, NegativeSampling
from graphlearn_torch.sampler.schema import RandomStream
from graphlearn_torch.typing import HOMO_NODE_TYPE

NUM_NODES = 40


def random_graph(seed, num_nodes=NUM_NODES, num_edges=300):
  rng = np.random.default_rng(seed)
  src = torch.from_numpy(rng.integers(0, num_nodes, num_edges))
  dst = torch.from_numpy(rng.integers(0, num_nodes, num_edges))
  node_time = torch.from_numpy(rng.integers(0, 30, num_nodes))
  edge_time = torch.from_numpy(rng.integers(0, 30, num_edges))
  return torch.stack([src, dst]), node_time, edge_time


def sampler_of(edge_index, edge_dir='out', device='cpu', **kwargs):
  layout = 'CSR' if edge_dir == 'out' else 'CSC'
  size = (NUM_NODES, NUM_NODES)
  graph = Graph(
    Topology(edge_index, layout=layout, size=size), 'CPU' if device == 'cpu' else 'CUDA'
  )
  return NeighborSampler(graph, device=device, with_edge=True, edge_dir=edge_dir, **kwargs)


def allowed_edges(edge_index, edge_dir, u, t, node_time=None, edge_time=None):
  """``[(neighbor, edge id)]`` that a node of a seed of time t may take from u."""
  src, dst = edge_index
  side, other = (src, dst) if edge_dir == 'out' else (dst, src)
  out = []
  for e in (side == u).nonzero().view(-1).tolist():
    v = int(other[e])
    if node_time is not None and node_time[v] > t:
      continue
    if edge_time is not None and edge_time[e] > t:
      continue
    out.append((v, e))
  return out


def ball(edge_index, edge_dir, seed, t, hops, node_time=None, edge_time=None):
  """The nodes and edge ids a seed of time t reaches in ``hops`` hops taking
  every allowed edge (a node met again is not expanded again)."""
  nodes, edges, frontier = {seed}, set(), [seed]
  for _ in range(hops):
    new = []
    for u in frontier:
      for v, e in allowed_edges(edge_index, edge_dir, u, t, node_time, edge_time):
        edges.add(e)
        if v not in nodes:
          nodes.add(v)
          new.append(v)
    frontier = new
  return nodes, edges


def per_seed(out, num_seeds):
  """``{seed i: (global node ids, edge ids)}`` of a disjoint output."""
  groups = {}
  for i in range(num_seeds):
    mask = out.seed_index == i
    local = set(mask.nonzero().view(-1).tolist())
    eids = {int(e) for c, e in zip(out.col.tolist(), out.edge.tolist()) if c in local}
    groups[i] = (set(out.node[mask].tolist()), eids)
  return groups


@pytest.mark.parametrize('edge_dir', ['out', 'in'])
@pytest.mark.parametrize('level', ['node', 'edge'])
def test_fanout_all_gives_the_allowed_ball(edge_dir, level):
  edge_index, node_time, edge_time = random_graph(1)
  times = {'node_time': node_time} if level == 'node' else {'edge_time': edge_time}
  sampler = sampler_of(edge_index, edge_dir, num_neighbors=[-1, -1], **times)
  seeds = torch.tensor([3, 7, 7, 20, 0])
  seed_time = torch.tensor([10, 25, 4, 15, 29])
  out = sampler.sample_from_nodes(NodeSamplerInput(seeds, time=seed_time))
  assert out.seed_index[: seeds.numel()].tolist() == list(range(seeds.numel()))
  assert torch.equal(out.node[: seeds.numel()], seeds), 'disjoint: every seed is its own node'
  assert torch.equal(out.metadata['seed_time'], seed_time)
  kw = {'node_time': node_time} if level == 'node' else {'edge_time': edge_time}
  for i, (nodes, eids) in per_seed(out, seeds.numel()).items():
    want_nodes, want_edges = ball(edge_index, edge_dir, int(seeds[i]), int(seed_time[i]), 2, **kw)
    assert nodes == want_nodes
    assert eids == want_edges


@pytest.mark.parametrize('level', ['node', 'edge'])
@pytest.mark.parametrize('strategy', ['uniform', 'last'])
def test_nothing_later_than_its_seed(level, strategy):
  edge_index, node_time, edge_time = random_graph(2, num_edges=600)
  times = {'node_time': node_time} if level == 'node' else {'edge_time': edge_time}
  sampler = sampler_of(edge_index, num_neighbors=[3, 2, 2], temporal_strategy=strategy, **times)
  for _ in range(5):
    seeds = torch.randint(0, NUM_NODES, (16,))
    seed_time = torch.randint(0, 30, (16,))
    out = sampler.sample_from_nodes(NodeSamplerInput(seeds, time=seed_time))
    bound = seed_time[out.seed_index]
    if level == 'node':
      nbrs = out.node[out.row]
      assert bool((node_time[nbrs] <= bound[out.row]).all()), 'a neighbor from the future'
    else:
      assert bool((edge_time[out.edge] <= bound[out.col]).all()), 'an edge from the future'
    # Every sampled edge is an edge of the graph, between the nodes it names.
    src, dst = edge_index
    assert torch.equal(src[out.edge], out.node[out.col])
    assert torch.equal(dst[out.edge], out.node[out.row])
    # Each node of a seed's subgraph gets at most `fanout` neighbors a hop.
    per_node = Counter(out.col.tolist())
    assert max(per_node.values(), default=0) <= 3


@pytest.mark.parametrize('level', ['node', 'edge'])
def test_last_takes_exactly_the_k_latest(level):
  edge_index, node_time, edge_time = random_graph(3, num_edges=800)
  times = {'node_time': node_time} if level == 'node' else {'edge_time': edge_time}
  sampler = sampler_of(edge_index, num_neighbors=[4], temporal_strategy='last', **times)
  seeds = torch.arange(NUM_NODES)
  seed_time = torch.randint(0, 30, (NUM_NODES,))
  out = sampler.sample_from_nodes(NodeSamplerInput(seeds, time=seed_time))
  src, dst = edge_index
  for i in range(NUM_NODES):
    t = int(seed_time[i])
    ok = [e for e in (src == i).nonzero().view(-1).tolist()]
    key = (lambda e: node_time[dst[e]]) if level == 'node' else (lambda e: edge_time[e])
    ok = [e for e in ok if key(e) <= t]
    # The row's order: by time, ties by neighbor id, then input position.
    ok.sort(key=lambda e: (int(key(e)), int(dst[e]), e))
    got = sorted(int(e) for c, e in zip(out.col.tolist(), out.edge.tolist()) if c == i)
    assert got == sorted(ok[-4:]), f'seed {i}'


def test_uniform_is_uniform_over_the_allowed_neighbors():
  # A star: node 0's 20 out-neighbors have times 0..19; a seed of time 9 may
  # take the first ten.
  edge_index = torch.stack([torch.zeros(20, dtype=torch.long), torch.arange(1, 21)])
  node_time = torch.cat([torch.tensor([0]), torch.arange(20)])
  graph = Graph(Topology(edge_index, layout='CSR', size=(21, 21)), 'CPU')
  sampler = NeighborSampler(graph, [3], device='cpu', node_time=node_time, seed=5)
  counts = Counter()
  for _ in range(1500):
    out = sampler.sample_from_nodes(NodeSamplerInput(torch.tensor([0]), time=torch.tensor([9])))
    counts.update(out.node[1:].tolist())
  assert set(counts) <= set(range(1, 11))
  assert stats.chisquare([counts[v] for v in range(1, 11)]).pvalue > 1e-3


@pytest.mark.parametrize('fanout', [[-1, -1], [2, 3]])
def test_disjoint_equals_each_seed_alone(fanout):
  edge_index, _, _ = random_graph(4)
  sampler = sampler_of(edge_index, num_neighbors=fanout, disjoint=True)
  alone = sampler_of(edge_index, num_neighbors=fanout)
  seeds = torch.tensor([1, 5, 1, 30])
  out = sampler.sample_from_nodes(NodeSamplerInput(seeds))
  assert torch.equal(out.node[:4], seeds)
  groups = per_seed(out, 4)
  for i, s in enumerate(seeds.tolist()):
    nodes, eids = groups[i]
    if fanout[0] == -1:  # deterministic: the very same subgraph
      one = alone.sample_from_nodes(NodeSamplerInput(torch.tensor([s])))
      assert nodes == set(one.node.tolist())
      assert eids == set(one.edge.tolist())
    else:  # a valid sample of its own: <= fanout per node a hop, real edges
      assert s in nodes
  # Relabelled per subgraph: an edge's ends are in the same subgraph.
  assert torch.equal(out.seed_index[out.row], out.seed_index[out.col])


def test_induced_has_every_edge_among_the_sampled_nodes():
  edge_index, _, _ = random_graph(5, num_edges=200)
  sampler = sampler_of(edge_index, num_neighbors=[2, 2], subgraph_type='induced')
  out = sampler.sample_from_nodes(NodeSamplerInput(torch.tensor([0, 9])))
  node = set(out.node.tolist())
  src, dst = edge_index
  want = {e for e in range(src.numel()) if int(src[e]) in node and int(dst[e]) in node}
  assert sorted(out.edge.tolist()) == sorted(want)
  assert torch.equal(src[out.edge], out.node[out.col])
  assert torch.equal(dst[out.edge], out.node[out.row])
  assert out.num_sampled_edges is None


def test_bidirectional_has_each_edge_both_ways():
  edge_index, _, _ = random_graph(6)
  sampler = sampler_of(edge_index, num_neighbors=[3, 2], seed=1)
  both = sampler_of(edge_index, num_neighbors=[3, 2], seed=1, subgraph_type='bidirectional')
  seeds = NodeSamplerInput(torch.tensor([2, 11]))
  one, two = sampler.sample_from_nodes(seeds), both.sample_from_nodes(seeds)
  assert torch.equal(one.node, two.node)
  directed = set(zip(one.row.tolist(), one.col.tolist()))
  want = directed | {(c, r) for r, c in directed}
  got = list(zip(two.row.tolist(), two.col.tolist()))
  assert len(got) == len(set(got)) and set(got) == want


def hetero_graph(seed=7):
  """users -buys-> items, items -rev_buys-> users, with times."""
  rng = np.random.default_rng(seed)
  n_user, n_item, n_edge = 15, 12, 120
  u = torch.from_numpy(rng.integers(0, n_user, n_edge))
  i = torch.from_numpy(rng.integers(0, n_item, n_edge))
  etypes = {
    ('user', 'buys', 'item'): torch.stack([u, i]),
    ('item', 'rev_buys', 'user'): torch.stack([i, u]),
  }
  sizes = {
    ('user', 'buys', 'item'): (n_user, n_item),
    ('item', 'rev_buys', 'user'): (n_item, n_user),
  }
  graphs = {e: Graph(Topology(ei, layout='CSR', size=sizes[e]), 'CPU') for e, ei in etypes.items()}
  node_time = {
    'user': torch.from_numpy(rng.integers(0, 20, n_user)),
    'item': torch.from_numpy(rng.integers(0, 20, n_item)),
  }
  edge_time = torch.from_numpy(rng.integers(0, 20, n_edge))
  return etypes, graphs, node_time, {e: edge_time for e in etypes}


@pytest.mark.parametrize('level', ['node', 'edge'])
def test_hetero_temporal_gives_the_allowed_ball(level):
  etypes, graphs, node_time, edge_time = hetero_graph()
  times = {'node_time': node_time} if level == 'node' else {'edge_time': edge_time}
  sampler = NeighborSampler(graphs, [-1, -1], device='cpu', with_edge=True, **times)
  seeds = torch.tensor([0, 4, 4])
  seed_time = torch.tensor([5, 19, 2])
  out = sampler.sample_from_nodes(NodeSamplerInput(seeds, 'user', seed_time))
  for i in range(3):
    t = int(seed_time[i])
    # Brute force over the typed graph.
    reached = {('user', int(seeds[i]))}
    frontier = set(reached)
    for _ in range(2):
      new = set()
      for ntype, u in frontier:
        for e, ei in etypes.items():
          if e[0] != ntype:
            continue
          for k in (ei[0] == u).nonzero().view(-1).tolist():
            v = int(ei[1][k])
            ok = node_time[e[2]][v] <= t if level == 'node' else edge_time[e][k] <= t
            if ok and (e[2], v) not in reached:
              new.add((e[2], v))
      reached |= new
      frontier = new
    got = {(t_, int(v)) for t_ in out.node for v in out.node[t_][out.seed_index[t_] == i]}
    assert got == reached, f'seed {i}'


def test_hetero_node_type_without_time_is_not_bounded():
  etypes, graphs, node_time, _ = hetero_graph()
  sampler = NeighborSampler(graphs, [-1], device='cpu', node_time={'user': node_time['user']})
  out = sampler.sample_from_nodes(NodeSamplerInput(torch.tensor([3]), 'user', torch.tensor([-5])))
  # Items have no time: every item of user 3 is reached, whatever its time.
  ei = etypes[('user', 'buys', 'item')]
  assert set(out.node['item'].tolist()) == set(ei[1][ei[0] == 3].tolist())


def test_link_temporal_gives_each_seed_edge_its_time():
  edge_index, node_time, _ = random_graph(8, num_edges=500)
  sampler = sampler_of(edge_index, num_neighbors=[3, 3], node_time=node_time, with_neg=True)
  row, col = torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6])
  time = torch.tensor([12, 3, 29])
  out = sampler.sample_from_edges(
    EdgeSamplerInput(row, col, neg_sampling=NegativeSampling('binary', 1), time=time)
  )
  meta = out.metadata
  assert torch.equal(meta['edge_label_time'], time.repeat(2))
  index = meta['edge_label_index']
  # Both ends of labelled pair j sit in subgraph j (PyG: seed % num_pos).
  assert torch.equal(out.seed_index[index[0]], torch.arange(6) % 3)
  assert torch.equal(out.seed_index[index[1]], torch.arange(6) % 3)
  bound = time[out.seed_index]
  assert bool((node_time[out.node[out.row]] <= bound[out.row]).all())


def test_bad_times_are_named():
  edge_index, node_time, edge_time = random_graph(9)
  plain = sampler_of(edge_index, num_neighbors=[2])
  with pytest.raises(ValueError, match='the sampler has no time attribute'):
    plain.sample_from_nodes(NodeSamplerInput(torch.tensor([1]), time=torch.tensor([3])))
  with pytest.raises(ValueError, match='node_time has 5 entries for 40 nodes'):
    sampler_of(edge_index, num_neighbors=[2], node_time=node_time[:5])
  with pytest.raises(ValueError, match='node_time holds NaN at 2'):
    bad = node_time.double()
    bad[2] = float('nan')
    sampler_of(edge_index, num_neighbors=[2], node_time=bad)
  with pytest.raises(ValueError, match='must hold integer or floating times'):
    sampler_of(edge_index, num_neighbors=[2], node_time=node_time > 3)
  with pytest.raises(ValueError, match='node_time must be 1-D'):
    sampler_of(edge_index, num_neighbors=[2], node_time=node_time.view(2, -1))
  with pytest.raises(ValueError, match='edge_time has 10 entries, but edge ids reach'):
    sampler_of(edge_index, num_neighbors=[2], edge_time=edge_time[:10])
  by_node = sampler_of(edge_index, num_neighbors=[2], node_time=node_time)
  with pytest.raises(
    ValueError, match="the seeds' times are torch.float32, the graph's times int64"
  ):
    by_node.sample_from_nodes(NodeSamplerInput(torch.tensor([1]), time=torch.tensor([3.0])))
  with pytest.raises(ValueError, match="the seeds' times holds NaN"):
    f = sampler_of(edge_index, num_neighbors=[2], node_time=node_time.double())
    f.sample_from_nodes(NodeSamplerInput(torch.tensor([1]), time=torch.tensor([float('nan')])))
  with pytest.raises(ValueError, match="the seeds' times has 2 entries, expected 1"):
    by_node.sample_from_nodes(NodeSamplerInput(torch.tensor([1]), time=torch.tensor([3, 4])))
  by_edge = sampler_of(edge_index, num_neighbors=[2], edge_time=edge_time)
  with pytest.raises(ValueError, match='needs the seeds.* times .* with edge-level time'):
    by_edge.sample_from_nodes(NodeSamplerInput(torch.tensor([1])))
  with pytest.raises(ValueError, match='temporal_strategy must be one of'):
    sampler_of(edge_index, num_neighbors=[2], node_time=node_time, temporal_strategy='first')
  with pytest.raises(ValueError, match="subgraph_type='induced' cannot be disjoint"):
    sampler_of(edge_index, num_neighbors=[2], node_time=node_time, subgraph_type='induced')
  with pytest.raises(ValueError, match='is_sorted=True, but the neighbors of row'):
    sampler_of(edge_index, num_neighbors=[2], node_time=node_time, is_sorted=True)


def test_node_level_default_seed_time_is_the_seeds_own():
  edge_index, node_time, _ = random_graph(10)
  sampler = sampler_of(edge_index, num_neighbors=[-1], node_time=node_time)
  seeds = torch.tensor([0, 1, 2])
  implicit = sampler.sample_from_nodes(NodeSamplerInput(seeds))
  explicit = sampler.sample_from_nodes(NodeSamplerInput(seeds, time=node_time[seeds]))
  assert torch.equal(implicit.node, explicit.node)
  assert torch.equal(implicit.metadata['seed_time'], node_time[seeds])


def test_sorted_rows_share_the_topology():
  # Node ids in time order: the id-sorted rows are time-sorted already.
  edge_index, _, _ = random_graph(11)
  node_time = torch.arange(NUM_NODES) // 3
  sampler = sampler_of(edge_index, num_neighbors=[2], node_time=node_time, is_sorted=True)
  ((etype, temporal),) = sampler.temporal.graphs.items()
  assert temporal.topo.indices.data_ptr() == sampler.graphs[etype].topo.indices.data_ptr()


@pytest.mark.parametrize('dtype', [torch.int64, torch.float64])
def test_time_sorted_rows_carry_their_latest_time(dtype):
  # Rows 40..44 have no entries; resize adds 3 more empty ones.
  edge_index, _, _ = random_graph(13, num_edges=120)
  topo = Topology(edge_index, size=(45, NUM_NODES))
  time = torch.randint(-5, 20, (topo.edge_count,), generator=torch.Generator().manual_seed(1))
  copy = glt.data.temporal.time_sorted(topo, time.to(dtype))
  copy.resize(num_rows=48)
  lowest = float('-inf') if dtype.is_floating_point else torch.iinfo(dtype).min
  ptr = copy.indptr.tolist()
  want = [max(copy.edge_time[a:b].tolist(), default=lowest) for a, b in zip(ptr, ptr[1:])]
  assert copy.row_max_time.dtype == dtype and copy.row_max_time.tolist() == want
  assert topo.row_max_time is None, 'a topology without times has none'


# -- loaders -------------------------------------------------------------------


def temporal_dataset(edge_dir='out'):
  edge_index, node_time, edge_time = random_graph(12, num_edges=500)
  ds = glt.data.Dataset(edge_dir=edge_dir)
  ds.init_graph(edge_index, graph_mode='CPU', num_nodes=NUM_NODES)
  # with_gpu=False: on a GPU machine the rows would be gathered into GPU memory.
  ds.init_node_features(torch.arange(NUM_NODES, dtype=torch.float32).view(-1, 1), with_gpu=False)
  ds.init_node_time(node_time)
  ds.init_edge_time(edge_time)
  return ds, edge_index, node_time, edge_time


@pytest.mark.parametrize('time_attr', ['node_time', 'edge_time'])
def test_neighbor_loader_batches_see_no_future(time_attr):
  ds, edge_index, node_time, edge_time = temporal_dataset()
  seeds = torch.arange(NUM_NODES)
  input_time = torch.randint(0, 30, (NUM_NODES,))
  loader = glt.loader.NeighborLoader(
    ds, [3, 2], seeds, batch_size=8, input_time=input_time, time_attr=time_attr,
    with_edge=True, device='cpu', shuffle=True, seed=3,
  )  # fmt: skip
  seen = 0
  for batch in loader:
    seen += batch.batch_size
    assert torch.equal(batch.seed_time, input_time[batch.input_id])
    assert torch.equal(batch.batch[: batch.batch_size], torch.arange(batch.batch_size))
    assert torch.equal(batch.x.view(-1).long(), batch.n_id)
    bound = batch.seed_time[batch.batch]
    row, col = batch.edge_index
    if time_attr == 'node_time':
      assert bool((node_time[batch.n_id[row]] <= bound[row]).all())
    else:
      assert bool((edge_time[batch.e_id] <= bound[col]).all())
  assert seen == NUM_NODES


def test_link_neighbor_loader_with_edge_label_time():
  ds, edge_index, node_time, _ = temporal_dataset()
  time = torch.randint(0, 30, (edge_index.size(1),))
  loader = glt.loader.LinkNeighborLoader(
    ds, [3, 2], edge_label_index=edge_index, edge_label_time=time, time_attr='node_time',
    neg_sampling='binary', batch_size=16, device='cpu',
  )  # fmt: skip
  for batch in loader:
    n = batch.input_id.numel()
    assert torch.equal(batch.edge_label_time, time[batch.input_id].repeat(2))
    bound = batch.edge_label_time[batch.batch]
    row, _ = batch.edge_index
    assert bool((node_time[batch.n_id[row]] <= bound[row]).all())
    assert batch.edge_label_index.size(1) == 2 * n


def test_loader_refuses_times_without_time_attr():
  ds, *_ = temporal_dataset()
  with pytest.raises(ValueError, match='the sampler has no time attribute'):
    next(
      iter(
        glt.loader.NeighborLoader(ds, [2], torch.arange(4), input_time=torch.zeros(4), device='cpu')
      )
    )
  with pytest.raises(ValueError, match="time_attr names the dataset's times"):
    glt.loader.NeighborLoader(ds, [2], torch.arange(4), time_attr='time', device='cpu')
  with pytest.raises(ValueError, match='input_time must hold one time per seed'):
    glt.loader.NeighborLoader(
      ds, [2], torch.arange(4), input_time=torch.zeros(3), time_attr='node_time', device='cpu'
    )
  empty = glt.data.Dataset()
  empty.init_graph(torch.tensor([[0], [1]]), graph_mode='CPU')
  with pytest.raises(ValueError, match="time_attr='node_time', but the dataset has none"):
    glt.loader.NeighborLoader(empty, [2], torch.arange(2), time_attr='node_time', device='cpu')


def test_disjoint_loader_batch_vector():
  ds, *_ = temporal_dataset()
  loader = glt.loader.NeighborLoader(
    ds, [2, 2], torch.tensor([0, 0, 5]), batch_size=3, disjoint=True, device='cpu'
  )
  batch = next(iter(loader))
  assert batch.batch_size == 3
  assert torch.equal(batch.n_id[:3], torch.tensor([0, 0, 5]))
  assert batch.batch.numel() == batch.num_nodes
  row, col = batch.edge_index
  assert torch.equal(batch.batch[row], batch.batch[col])


@pytest.mark.parametrize(
  'device',
  [
    'cpu',
    pytest.param(
      'cuda',
      marks=pytest.mark.skipif(not cuda_kernels_available(), reason='needs a GPU and its kernels'),
    ),
  ],
)
@pytest.mark.parametrize('times', [None, 'node_time', 'edge_time'])
@pytest.mark.parametrize('strategy', ['uniform', 'last'])
def test_fused_draws_equal_answered_hops(device, times, strategy):
  # The inducer draws each hop itself (disjoint keys and time windows inside
  # sample_induce_next, on the CPU and on a GPU); the same streams answered
  # hop by hop (sample_one_hop, glt::disjoint_keys, induce_next) give the
  # same batch.
  edge_index, node_time, edge_time = random_graph(13, num_edges=700)
  given = {'node_time': node_time, 'edge_time': edge_time}
  options = {times: given[times], 'temporal_strategy': strategy} if times else {'disjoint': True}
  sampler = sampler_of(edge_index, num_neighbors=[4, 3], device=device, **options)
  seed_dict = {HOMO_NODE_TYPE: torch.randint(0, NUM_NODES, (24,)).to(device)}
  seed_time = {HOMO_NODE_TYPE: torch.randint(0, 30, (24,)).to(device)} if times else None
  fused = sampler._sample(seed_dict, RandomStream(5), seed_time)
  random = RandomStream(5)
  answered = sampler.engine.sample(seed_dict, lambda r: sampler._answer(r, random), None, seed_time)
  for field in ('node', 'row', 'col', 'edge', 'seed_index'):
    a, b = getattr(fused, field), getattr(answered, field)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), field


def test_triplet_negatives_take_their_edges_time():
  ds, edge_index, node_time, _ = temporal_dataset()
  time = torch.randint(0, 30, (edge_index.size(1),))
  loader = glt.loader.LinkNeighborLoader(
    ds, [3, 2], edge_label_index=edge_index, edge_label_time=time, time_attr='node_time',
    neg_sampling='triplet', batch_size=16, device='cpu', seed=2,
  )  # fmt: skip
  for batch in loader:
    n = batch.input_id.numel()
    assert torch.equal(batch.seed_time, time[batch.input_id])
    # Each node's subgraph is a seed edge's (both ends and its negative).
    bound = batch.seed_time[batch.batch]
    row, col = batch.edge_index
    assert bool((node_time[batch.n_id[row]] <= bound[row]).all())
    assert torch.equal(batch.batch[batch.src_index], torch.arange(n))
    assert torch.equal(batch.batch[batch.dst_pos_index], torch.arange(n))
    assert torch.equal(batch.batch[batch.dst_neg_index], torch.arange(n))
