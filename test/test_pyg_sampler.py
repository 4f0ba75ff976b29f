"""PyGNeighborSampler inside PyG's own NodeLoader and LinkLoader: batches in
PyG's layout whose edges are edges of the graph, checked against the graph
(brute force) for Data, HeteroData and a (FeatureStore, GraphStore) pair."""

import pytest
import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import LinkLoader, NodeLoader
from torch_geometric.sampler import NegativeSampling
from torch_geometric.testing.feature_store import MyFeatureStore
from torch_geometric.testing.graph_store import MyGraphStore

import graphlearn_torch as glt

N, E = 60, 400


def random_data(seed=0) -> Data:
  g = torch.Generator().manual_seed(seed)
  edge_index = torch.randint(0, N, (2, E), generator=g)
  return Data(
    x=torch.randn(N, 4, generator=g),
    y=torch.arange(N),
    edge_index=edge_index,
    edge_attr=torch.arange(E, dtype=torch.float32),
    num_nodes=N,
  )


def in_edges(edge_index: torch.Tensor, node: int) -> set:
  return set((edge_index[1] == node).nonzero().view(-1).tolist())


def check_batch(batch, data, fanouts, seeds):
  r"""PyG's layout, and edges of the graph within the fanouts."""
  n_id, e_id, (row, col) = batch.n_id, batch.e_id, batch.edge_index
  assert torch.equal(n_id[: batch.batch_size], seeds), 'seeds first, in order'
  assert n_id.unique().numel() == n_id.numel()
  assert torch.equal(data.edge_index[0, e_id], n_id[row]), 'row: the neighbor (source)'
  assert torch.equal(data.edge_index[1, e_id], n_id[col]), 'col: the node sampled for'
  assert torch.equal(batch.x, data.x[n_id]) and torch.equal(batch.y, data.y[n_id])
  assert torch.equal(batch.edge_attr, data.edge_attr[e_id])
  assert sum(batch.num_sampled_nodes) == n_id.numel()
  assert sum(batch.num_sampled_edges) == e_id.numel()
  assert len(batch.num_sampled_nodes) == len(fanouts) + 1
  first_hop = e_id[: batch.num_sampled_edges[0]]
  for i, seed in enumerate(seeds.tolist()):
    picked = set(first_hop[col[: first_hop.numel()] == i].tolist())
    every = in_edges(data.edge_index, seed)
    if fanouts[0] < 0:
      assert picked == every, 'fanout -1: every in-edge of the seed'
    else:
      assert picked <= every and len(picked) == min(fanouts[0], len(every))


SPAWNED = pytest.param(2, 'spawn', marks=pytest.mark.slow)  # spawned processes


@pytest.mark.parametrize('num_workers, context', [(0, None), (2, None), SPAWNED])
def test_node_loader(num_workers, context):
  data = random_data()
  fanouts = [3, 2]
  # spawned workers get the topology through shared memory, not a copy each
  sampler = glt.sampler.PyGNeighborSampler(data, fanouts, share_memory=context == 'spawn')
  if context == 'spawn':
    topo = sampler.dataset.graph.topo
    assert topo.indptr.is_shared() and topo.indices.is_shared()
  seeds = torch.randperm(N)[:25]
  loader = NodeLoader(
    data, sampler, input_nodes=seeds, batch_size=8, num_workers=num_workers,
    filter_per_worker=num_workers > 0, multiprocessing_context=context,
  )  # fmt: skip
  covered = []
  for batch in loader:
    batch_seeds = seeds[batch.input_id]
    check_batch(batch, data, fanouts, batch_seeds)
    covered.append(batch_seeds)
  assert torch.equal(torch.cat(covered).sort().values, seeds.sort().values)


def test_node_loader_every_neighbor_matches_brute_force():
  data = random_data(1)
  sampler = glt.sampler.PyGNeighborSampler(data, [-1, -1])
  loader = NodeLoader(data, sampler, input_nodes=torch.arange(N), batch_size=16)
  for batch in loader:
    check_batch(batch, data, [-1, -1], batch.n_id[: batch.batch_size])
    # two hops of every in-edge: the nodes within two hops, brute force
    seeds = set(batch.n_id[: batch.batch_size].tolist())
    hop1 = {int(data.edge_index[0, e]) for s in seeds for e in in_edges(data.edge_index, s)}
    hop2 = {int(data.edge_index[0, e]) for s in hop1 for e in in_edges(data.edge_index, s)}
    assert set(batch.n_id.tolist()) == seeds | hop1 | hop2


def homo_stores(data: Data):
  r"""``data`` in PyG's reference in-memory (FeatureStore, GraphStore)."""
  features, graph = MyFeatureStore(), MyGraphStore()
  features.put_tensor(data.x, group_name=None, attr_name='x', index=None)
  features.put_tensor(data.y, group_name=None, attr_name='y', index=None)
  graph.put_edge_index(data.edge_index, edge_type=None, layout='coo', size=(N, N))
  return features, graph


def test_store_pair_gives_the_batches_of_data():
  data = random_data(2)
  seeds = torch.arange(0, N, 3)
  batches = []
  for source in (data, homo_stores(data)):
    sampler = glt.sampler.PyGNeighborSampler(source, [4, 3], seed=7)
    loader = NodeLoader(source, sampler, input_nodes=seeds, batch_size=10)
    batches.append(list(loader))
  for a, b in zip(*batches):
    assert torch.equal(a.n_id, b.n_id)
    assert torch.equal(a.edge_index, b.edge_index)
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)


def test_store_in_csc_maps_edge_ids_back():
  data = random_data(3)
  features, _ = homo_stores(data)
  graph = MyGraphStore()  # holds CSC only
  perm = data.edge_index[1].argsort(stable=True)
  col, row = data.edge_index[1, perm], data.edge_index[0, perm]
  colptr = torch.zeros(N + 1, dtype=torch.long)
  colptr[1:] = torch.bincount(col, minlength=N).cumsum(0)
  graph.put_edge_index((row, colptr), edge_type=None, layout='csc', size=(N, N), is_sorted=True)
  sampler = glt.sampler.PyGNeighborSampler((features, graph), [3, 2])
  loader = NodeLoader((features, graph), sampler, input_nodes=torch.arange(N), batch_size=16)
  for batch in loader:
    # e_id (the loader applies edge_permutation): ids of the stored CSC edges
    assert torch.equal(row[batch.e_id], batch.n_id[batch.edge_index[0]])
    assert torch.equal(col[batch.e_id], batch.n_id[batch.edge_index[1]])


def hetero_data() -> HeteroData:
  g = torch.Generator().manual_seed(3)
  h = HeteroData()
  h['paper'].x = torch.randn(30, 4, generator=g)
  h['author'].x = torch.randn(20, 4, generator=g)
  writes = torch.stack(
    [torch.randint(0, 20, (80,), generator=g), torch.randint(0, 30, (80,), generator=g)]
  )
  cites = torch.randint(0, 30, (2, 90), generator=g)
  h['author', 'writes', 'paper'].edge_index = writes
  h['paper', 'rev_writes', 'author'].edge_index = writes.flip(0)
  h['paper', 'cites', 'paper'].edge_index = cites
  return h


@pytest.mark.parametrize('as_stores', [False, True])
def test_hetero_node_loader(as_stores):
  h = hetero_data()
  source = (h, h) if as_stores else h
  sampler = glt.sampler.PyGNeighborSampler(source, [3, 2])
  loader = NodeLoader(source, sampler, input_nodes=('paper', torch.arange(30)), batch_size=7)
  seen = 0
  for batch in loader:
    assert set(batch.node_types) == set(h.node_types)
    assert set(batch.edge_types) == set(h.edge_types)
    size = batch['paper'].batch_size
    assert torch.equal(batch['paper'].n_id[:size], batch['paper'].input_id)
    seen += size
    for ntype in h.node_types:
      assert torch.equal(batch[ntype].x, h[ntype].x[batch[ntype].n_id])
      assert len(batch[ntype].num_sampled_nodes) == 3
      assert sum(batch[ntype].num_sampled_nodes) == batch[ntype].n_id.numel()
    for etype in h.edge_types:
      src, _, dst = etype
      row, col = batch[etype].edge_index
      e_id = batch[etype].e_id
      assert torch.equal(h[etype].edge_index[0, e_id], batch[src].n_id[row])
      assert torch.equal(h[etype].edge_index[1, e_id], batch[dst].n_id[col])
      assert len(batch[etype].num_sampled_edges) == 2
  assert seen == 30


def test_link_loader_binary():
  data = random_data(4)
  sampler = glt.sampler.PyGNeighborSampler(data, [3, 2])
  label_index = data.edge_index[:, :40]
  loader = LinkLoader(
    data, sampler, edge_label_index=label_index, batch_size=10,
    neg_sampling=NegativeSampling('binary', 2),
  )  # fmt: skip
  edges = set(zip(*data.edge_index.tolist()))
  for batch in loader:
    pairs = batch.n_id[batch.edge_label_index]
    num_pos = batch.input_id.numel()
    assert pairs.size(1) == 3 * num_pos
    assert torch.equal(pairs[:, :num_pos], label_index[:, batch.input_id])
    assert torch.equal(batch.edge_label, torch.cat([torch.ones(num_pos), torch.zeros(2 * num_pos)]))
    assert not set(zip(*pairs[:, num_pos:].tolist())) & edges, 'negatives are not edges'
    assert torch.equal(data.edge_index[0, batch.e_id], batch.n_id[batch.edge_index[0]])


def test_link_loader_triplet():
  data = random_data(5)
  sampler = glt.sampler.PyGNeighborSampler(data, [2])
  label_index = data.edge_index[:, :30]
  loader = LinkLoader(
    data, sampler, edge_label_index=label_index, batch_size=10,
    neg_sampling=NegativeSampling('triplet', 3),
  )  # fmt: skip
  for batch in loader:
    n = batch.input_id.numel()
    assert torch.equal(batch.n_id[batch.src_index], label_index[0, batch.input_id])
    assert torch.equal(batch.n_id[batch.dst_pos_index], label_index[1, batch.input_id])
    assert batch.dst_neg_index.shape == (n, 3)
    assert int(batch.dst_neg_index.max()) < batch.n_id.numel()


def test_backward_samples_out_edges_in_the_graphs_direction():
  # PyG's sample_direction='backward': a seed's out-neighbors; edges come
  # back as the graph holds them (row: the seed side), e_id their positions.
  data = random_data(2)
  sampler = glt.sampler.PyGNeighborSampler(data, [-1, -1], sample_direction='backward')
  src, dst = data.edge_index
  for batch in NodeLoader(data, sampler, input_nodes=torch.arange(N), batch_size=16):
    row, col = batch.n_id[batch.edge_index[0]], batch.n_id[batch.edge_index[1]]
    assert torch.equal(src[batch.e_id], row) and torch.equal(dst[batch.e_id], col)
    seeds = set(batch.n_id[: batch.batch_size].tolist())
    hop1 = {int(dst[e]) for e in range(E) if int(src[e]) in seeds}
    hop2 = {int(dst[e]) for e in range(E) if int(src[e]) in hop1}
    assert set(batch.n_id.tolist()) == seeds | hop1 | hop2
    # the first hop: every out-edge of the seeds, nothing else
    first = batch.e_id[: batch.num_sampled_edges[0]]
    assert set(first.tolist()) == {e for e in range(E) if int(src[e]) in seeds}


def test_backward_hetero_keeps_the_graphs_edge_types():
  data = hetero_data()
  sampler = glt.sampler.PyGNeighborSampler(data, [-1], sample_direction='backward')
  loader = NodeLoader(data, sampler, input_nodes=('author', torch.arange(20)), batch_size=20)
  batch = next(iter(loader))
  writes = data['author', 'writes', 'paper'].edge_index
  store = batch['author', 'writes', 'paper']
  row = batch['author'].n_id[store.edge_index[0]]
  col = batch['paper'].n_id[store.edge_index[1]]
  assert torch.equal(writes[0, store.e_id], row) and torch.equal(writes[1, store.e_id], col)
  assert sorted(store.e_id.tolist()) == list(range(writes.size(1)))  # every author's out-edge


def test_backward_temporal_sees_no_future():
  # PyG refuses time_attr with backward sampling; ours bounds the out-edges.
  data = random_data(4)
  data.time = torch.randint(0, 20, (N,), generator=torch.Generator().manual_seed(4))
  sampler = glt.sampler.PyGNeighborSampler(
    data, [-1, -1], sample_direction='backward', time_attr='time'
  )
  src, dst = data.edge_index
  for batch in NodeLoader(data, sampler, input_nodes=torch.arange(N), batch_size=16):
    row, col = batch.edge_index  # seed side -> out-neighbor
    seed_time = data.time[batch.n_id[: batch.batch_size]]  # PyG's default: their own
    bound = seed_time[batch.batch]
    assert bool((data.time[batch.n_id[col]] <= bound[col]).all()), 'from the future'
    assert torch.equal(src[batch.e_id], batch.n_id[row])
    # the first hop: every allowed out-edge of every seed
    want = {
      (i, e)
      for i, s in enumerate(batch.n_id[: batch.batch_size].tolist())
      for e in range(E)
      if int(src[e]) == s and int(data.time[dst[e]]) <= int(seed_time[i])
    }
    first = range(int(batch.num_sampled_edges[0]))
    assert {(int(batch.batch[row[k]]), int(batch.e_id[k])) for k in first} == want


def test_directed_false_is_induced_with_pygs_warning():
  data = random_data()
  with pytest.warns(UserWarning, match="subgraph_type='induced'"):
    sampler = glt.sampler.PyGNeighborSampler(data, [2], directed=False)
  assert sampler.sampler.subgraph_type == 'induced'
  with pytest.raises(ValueError, match='sample_direction'):
    glt.sampler.PyGNeighborSampler(data, [2], sample_direction='sideways')


def test_a_repeated_seed_is_an_error():
  data = random_data()
  sampler = glt.sampler.PyGNeighborSampler(data, [2])
  loader = NodeLoader(data, sampler, input_nodes=torch.tensor([1, 1, 2]), batch_size=3)
  with pytest.raises(ValueError, match='same seed node twice'):
    next(iter(loader))


def test_weighted_sampling_never_picks_a_zero_weight_edge():
  data = random_data(6)
  data.weight = (torch.arange(E) % 2).float()  # odd edges only
  sampler = glt.sampler.PyGNeighborSampler(data, [2, 2], weight_attr='weight')
  for batch in NodeLoader(data, sampler, input_nodes=torch.arange(N), batch_size=20):
    assert bool((batch.e_id % 2 == 1).all())


def test_readme_pyg_loader_form_runs():
  r"""The README's PyG-loader form (its '+' and context lines) runs as written."""
  from pathlib import Path

  readme = (Path(__file__).resolve().parents[1] / 'README.md').read_text()
  block = readme.split("Or keep PyG's own loaders")[1].split('```diff\n')[1].split('```')[0]
  code = '\n'.join(line[1:] for line in block.splitlines() if not line.startswith('-'))
  data = random_data(7)
  data.train_mask = torch.rand(N) < 0.5
  model = lambda x, edge_index: x  # noqa: E731
  namespace = {'data': data, 'model': model}
  exec(compile(code.replace('batch_size=1024', 'batch_size=8'), 'README.md', 'exec'), namespace)
  batch = namespace['batch']
  assert batch.batch_size <= 8 and namespace['out'].size(0) == batch.batch_size
  assert torch.equal(data.edge_index[0, batch.e_id], batch.n_id[batch.edge_index[0]])


# -- temporal, disjoint, induced (PyG's semantics) -------------------------------


def temporal_hetero_data(seed=3) -> HeteroData:
  """users -rates-> movies (and back), with node times."""
  g = torch.Generator().manual_seed(seed)
  data = HeteroData()
  data['user'].num_nodes, data['movie'].num_nodes = 30, 20
  data['user'].time = torch.randint(0, 50, (30,), generator=g)
  data['movie'].time = torch.randint(0, 50, (20,), generator=g)
  data['user'].x = torch.arange(30, dtype=torch.float).view(-1, 1)
  data['movie'].x = torch.arange(20, dtype=torch.float).view(-1, 1)
  u = torch.randint(0, 30, (150,), generator=g)
  m = torch.randint(0, 20, (150,), generator=g)
  data['user', 'rates', 'movie'].edge_index = torch.stack([u, m])
  data['movie', 'rev_rates', 'user'].edge_index = torch.stack([m, u])
  return data


@pytest.mark.parametrize('num_workers, context', [(0, None), SPAWNED])
def test_pyg_node_loader_temporal_hetero(num_workers, context):
  data = temporal_hetero_data()
  # Spawned workers get the time-sorted topologies through shared memory.
  sampler = glt.sampler.PyGNeighborSampler(
    data, [4, 3], time_attr='time', share_memory=context == 'spawn'
  )
  assert sampler.disjoint, 'temporal sampling is disjoint, as in PyG'
  input_time = torch.randint(0, 50, (30,))
  loader = NodeLoader(
    data, sampler, input_nodes='user', input_time=input_time, batch_size=8, shuffle=True,
    num_workers=num_workers, filter_per_worker=num_workers > 0, multiprocessing_context=context,
  )  # fmt: skip
  for batch in loader:
    user = batch['user']
    n = user.batch_size
    assert torch.equal(user.seed_time, input_time[user.input_id])
    assert torch.equal(user.batch[:n], torch.arange(n))
    for ntype in ('user', 'movie'):
      store = batch[ntype]
      bound = user.seed_time[store.batch]
      # Seeds are bounded by their own time only through their neighbors.
      sampled = torch.arange(store.num_nodes) >= (n if ntype == 'user' else 0)
      assert bool((data[ntype].time[store.n_id][sampled] <= bound[sampled]).all())
      assert torch.equal(store.x.view(-1).long(), store.n_id)


def test_pyg_link_loader_temporal_binary():
  data = temporal_hetero_data(4)
  sampler = glt.sampler.PyGNeighborSampler(data, [3, 2], time_attr='time')
  etype = ('user', 'rates', 'movie')
  label_index = data[etype].edge_index[:, :40]
  label_time = torch.randint(10, 50, (40,))
  loader = LinkLoader(
    data, sampler, edge_label_index=(etype, label_index), edge_label_time=label_time,
    neg_sampling=NegativeSampling('binary', 1), batch_size=10,
  )  # fmt: skip
  for batch in loader:
    store = batch[etype]
    n = store.input_id.numel()
    assert torch.equal(store.edge_label_time, label_time[store.input_id].repeat(2))
    assert store.edge_label_index.size(1) == 2 * n
    for ntype in ('user', 'movie'):
      bound = store.edge_label_time[batch[ntype].batch]
      nodes = batch[ntype].n_id
      seeds_of_type = 2 * n  # positives' and negatives' ends come first
      t = data[ntype].time[nodes][seeds_of_type:]
      assert bool((t <= bound[seeds_of_type:]).all())


def test_pyg_edge_level_time_and_last():
  data = random_data(7)
  data.edge_time = torch.randint(0, 100, (E,))
  sampler = glt.sampler.PyGNeighborSampler(
    data, [2], time_attr='edge_time', temporal_strategy='last'
  )
  seeds = torch.arange(N)
  input_time = torch.randint(0, 100, (N,))
  batch = next(
    iter(NodeLoader(data, sampler, input_nodes=seeds, input_time=input_time, batch_size=N))
  )
  src, dst = data.edge_index
  for i in range(N):
    # in-edges of seed i (PyG samples along incoming edges) no later than its time
    allowed = [
      e for e in (dst == i).nonzero().view(-1).tolist() if data.edge_time[e] <= input_time[i]
    ]
    allowed.sort(key=lambda e: (int(data.edge_time[e]), int(src[e]), e))
    got = sorted(batch.e_id[batch.edge_index[1] == i].tolist())
    assert got == sorted(allowed[-2:])


def test_pyg_disjoint_and_induced():
  data = random_data(8)
  disjoint = glt.sampler.PyGNeighborSampler(data, [2, 2], disjoint=True)
  batch = next(iter(NodeLoader(data, disjoint, input_nodes=torch.arange(6), batch_size=6)))
  assert batch.batch.numel() == batch.num_nodes
  row, col = batch.edge_index
  assert torch.equal(batch.batch[row], batch.batch[col])
  induced = glt.sampler.PyGNeighborSampler(data, [2, 2], subgraph_type='induced')
  batch = next(iter(NodeLoader(data, induced, input_nodes=torch.arange(6), batch_size=6)))
  nodes = set(batch.n_id.tolist())
  src, dst = data.edge_index
  want = {e for e in range(E) if int(src[e]) in nodes and int(dst[e]) in nodes}
  assert set(batch.e_id.tolist()) == want
  with pytest.raises(ValueError, match='induced.*cannot be disjoint'):
    glt.sampler.PyGNeighborSampler(data, [2], subgraph_type='induced', disjoint=True)
