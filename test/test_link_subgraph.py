"""Negative sampling, link sampling, subgraphs and sample_prob against brute force."""

import pytest
import torch
from conftest import random_edges

from graphlearn_torch.data import Dataset
from graphlearn_torch.loader import LinkNeighborLoader, SubGraphLoader
from graphlearn_torch.sampler import (
  EdgeSamplerInput,
  NegativeSampling,
  NeighborSampler,
  NodeSamplerInput,
  RandomNegativeSampler,
)
from graphlearn_torch.typing import reverse_edge_type


def homo(edge_dir='out', n=40, e=300, seed=0):
  ei = random_edges(n, n, e, seed=seed)
  ds = Dataset(edge_dir=edge_dir)
  ds.init_graph(ei, graph_mode='CPU', num_nodes=n)
  ds.init_node_features(torch.randn(n, 4))
  return ds, ei


def edge_set(ei):
  return set(map(tuple, ei.t().tolist()))


@pytest.mark.parametrize('edge_dir', ['out', 'in'])
def test_negatives_are_never_edges(edge_dir):
  ds, ei = homo(edge_dir)
  edges = edge_set(ei)
  neg = RandomNegativeSampler(ds.graph, edge_dir=edge_dir)
  pairs = neg.sample(2000)
  assert pairs.shape[0] == 2 and 0 < pairs.size(1) <= 2000
  assert not (set(map(tuple, pairs.t().tolist())) & edges)
  src = torch.arange(40).repeat(5)
  fixed = neg.sample(0, trials_num=20, padding=True, src=src)
  assert torch.equal(fixed[0], src)
  assert not (set(map(tuple, fixed.t().tolist())) & edges)


def test_has_edge_matches_brute_force():
  ds, ei = homo('out')
  edges = edge_set(ei)
  topo = ds.graph.topo
  rows, cols = torch.randint(0, 40, (2, 1000))
  rows, cols = torch.cat([rows, ei[0]]), torch.cat([cols, ei[1]])
  found = torch.ops.glt.has_edge(topo.indptr, topo.indices, rows, cols)
  assert found.tolist() == [(r, c) in edges for r, c in zip(rows.tolist(), cols.tolist())]
  with pytest.raises(ValueError, match='rows holds ids outside'):
    torch.ops.glt.has_edge(topo.indptr, topo.indices, torch.tensor([40]), torch.tensor([0]))
  with pytest.raises(ValueError, match='differ in length'):
    torch.ops.glt.has_edge(topo.indptr, topo.indices, torch.tensor([1, 2]), torch.tensor([0]))


def test_negative_padding_and_dense_graph():
  full = torch.cartesian_prod(torch.arange(5), torch.arange(5)).t()  # every pair an edge
  ds = Dataset()
  ds.init_graph(full[:, :-1], graph_mode='CPU')  # all but (4, 4)
  neg = RandomNegativeSampler(ds.graph)
  strict = neg.sample(300, trials_num=3)
  assert all(tuple(p) == (4, 4) for p in strict.t().tolist())
  assert strict.size(1) < 300
  assert neg.sample(300, trials_num=3, padding=True).size(1) == 300


@pytest.mark.parametrize('edge_dir', ['out', 'in'])
def test_binary_link_batches(edge_dir):
  ds, ei = homo(edge_dir)
  edges = edge_set(ei)
  seeds = ei[:, :50]
  loader = LinkNeighborLoader(
    ds,
    [3, 2],
    edge_label_index=seeds,
    neg_sampling=NegativeSampling('binary', 2),
    batch_size=20,
    shuffle=True,
    device='cpu',
    seed=0,
  )
  seen = []
  for batch in loader:
    n = batch.input_id.numel()
    assert batch.edge_label_index.shape == (2, 3 * n)
    assert torch.equal(batch.edge_label, torch.cat([torch.ones(n), torch.zeros(2 * n)]))
    pairs = batch.n_id[batch.edge_label_index]  # every endpoint is in the batch
    assert torch.equal(pairs[:, :n], seeds[:, batch.input_id])
    assert not (set(map(tuple, pairs[:, n:].t().tolist())) & edges)
    assert torch.equal(batch.x, ds.node_features[batch.n_id])
    seen.append(batch.input_id)
  assert sorted(torch.cat(seen).tolist()) == list(range(50))


def test_binary_user_labels_are_shifted():
  ds, ei = homo()
  labels = torch.tensor([0, 1, 2, 0])
  loader = LinkNeighborLoader(
    ds,
    [2],
    edge_label_index=ei[:, :4],
    edge_label=labels,
    neg_sampling=NegativeSampling('binary', 1),
    batch_size=4,
    device='cpu',
  )
  batch = next(iter(loader))
  assert batch.edge_label.tolist() == [1, 2, 3, 1, 0, 0, 0, 0]
  plain = LinkNeighborLoader(
    ds, [2], edge_label_index=ei[:, :4], edge_label=labels, batch_size=4, device='cpu'
  )
  batch = next(iter(plain))
  assert batch.edge_label.tolist() == [0, 1, 2, 0]
  assert torch.equal(batch.n_id[batch.edge_label_index], ei[:, :4])


def test_triplet_link_batches():
  # Triplet negatives are padded: a destination whose 5 tries all hit edges
  # is kept. On a sparse graph that never happens in practice (on 40 nodes
  # with 300 edges it did, once in about 30 runs).
  ds, ei = homo('in', n=400)
  edges = edge_set(ei)
  loader = LinkNeighborLoader(
    ds,
    [2, 2],
    edge_label_index=ei[:, :30],
    neg_sampling=NegativeSampling('triplet', 3),
    batch_size=10,
    device='cpu',
  )
  for batch in loader:
    idx = batch.input_id
    assert torch.equal(batch.n_id[batch.src_index], ei[0, idx])
    assert torch.equal(batch.n_id[batch.dst_pos_index], ei[1, idx])
    assert batch.dst_neg_index.shape == (10, 3)
    neg_dst = batch.n_id[batch.dst_neg_index]
    for s, row in zip(ei[0, idx].tolist(), neg_dst.tolist()):
      assert all((s, d) not in edges for d in row)


@pytest.mark.parametrize('edge_dir', ['out', 'in'])
def test_hetero_link_batches(edge_dir):
  edges = {
    ('user', 'buys', 'item'): random_edges(20, 30, 100, seed=1),
    ('item', 'similar', 'item'): random_edges(30, 30, 80, seed=2),
  }
  ds = Dataset(edge_dir=edge_dir)
  ds.init_graph(edges, graph_mode='CPU', num_nodes={'user': 20, 'item': 30})
  et = ('user', 'buys', 'item')
  loader = LinkNeighborLoader(
    ds,
    [2, 2],
    edge_label_index=(et, edges[et][:, :24]),
    neg_sampling='binary',
    batch_size=8,
    device='cpu',
    with_edge=True,
  )
  known = edge_set(edges[et])
  # GLT's layout: with edge_dir 'out' the labels sit on the reversed type, reversed
  label_et = reverse_edge_type(et) if edge_dir == 'out' else et
  for batch in loader:
    eli = batch[label_et].edge_label_index
    if edge_dir == 'out':
      eli = eli.flip(0)
    src, dst = batch['user'].n_id[eli[0]], batch['item'].n_id[eli[1]]
    input_id = batch[label_et].input_id
    n = input_id.numel()
    assert torch.equal(torch.stack([src[:n], dst[:n]]), edges[et][:, input_id])
    assert not (set(zip(src[n:].tolist(), dst[n:].tolist())) & known)
    for out_et in batch.edge_types:
      if 'e_id' not in batch[out_et]:
        continue
      orig = reverse_edge_type(out_et) if edge_dir == 'out' else out_et
      s = batch[out_et[0]].n_id[batch[out_et].edge_index[0]]
      d = batch[out_et[-1]].n_id[batch[out_et].edge_index[1]]
      pair = torch.stack([d, s] if edge_dir == 'out' else [s, d])
      assert torch.equal(edges[orig][:, batch[out_et].e_id], pair)


@pytest.mark.parametrize('edge_dir', ['out', 'in'])
@pytest.mark.parametrize('fanout', [None, [3]])
def test_subgraph_holds_exactly_the_induced_edges(edge_dir, fanout):
  ds, ei = homo(edge_dir)
  loader = SubGraphLoader(
    ds, torch.arange(0, 40, 4), fanout, batch_size=5, with_edge=True, device='cpu'
  )
  for batch in loader:
    nodes = set(batch.n_id.tolist())
    assert torch.equal(batch.n_id[batch.mapping], torch.arange(0, 40, 4)[batch.input_id])
    expected = sorted(i for i, (s, d) in enumerate(ei.t().tolist()) if s in nodes and d in nodes)
    assert sorted(batch.e_id.tolist()) == expected
    s, d = batch.n_id[batch.edge_index[0]], batch.n_id[batch.edge_index[1]]
    pair = torch.stack([d, s] if edge_dir == 'out' else [s, d])
    assert torch.equal(ei[:, batch.e_id], pair)


# One hop is exact (up to Monte-Carlo noise); deeper hops take picks from
# different nodes as independent, which is off where parents are correlated.
@pytest.mark.parametrize('fanout,max_tol,mean_tol', [([2], 0.03, 0.005), ([2, 2], 0.1, 0.015)])
def test_sample_prob_matches_monte_carlo(fanout, max_tol, mean_tol):
  ds, _ = homo('out', n=60, e=240, seed=4)
  seeds = torch.tensor([0, 7, 13, 21])
  sampler = NeighborSampler(ds.graph, fanout, device='cpu', seed=0)
  prob = sampler.sample_prob(NodeSamplerInput(seeds), 60)
  assert prob.shape == (60,) and torch.all(prob[seeds] == 1)
  runs, hits = 3000, torch.zeros(60)
  for _ in range(runs):
    hits[sampler.sample_from_nodes(NodeSamplerInput(seeds)).node] += 1
  err = (prob - hits / runs).abs()
  assert err.max() < max_tol and err.mean() < mean_tol


def test_link_bad_input():
  ds, ei = homo()
  with pytest.raises(ValueError, match='out of range'):
    LinkNeighborLoader(ds, [2], edge_label_index=torch.tensor([[0, 99], [1, 2]]), device='cpu')
  with pytest.raises(ValueError, match=r'shape \[2, num_edges\]'):
    LinkNeighborLoader(ds, [2], edge_label_index=torch.zeros(3, 2, dtype=torch.long), device='cpu')
  for amount in (0, -1, float('nan'), float('inf'), '2'):
    with pytest.raises(ValueError, match='amount must be a finite number > 0'):
      NegativeSampling('binary', amount)
  with pytest.raises(ValueError, match="'binary' or 'triplet'"):
    NegativeSampling('ternary')
  with pytest.raises(ValueError, match='trials_num'):
    RandomNegativeSampler(ds.graph).sample(5, trials_num=0)
  sampler = NeighborSampler(ds.graph, [2], device='cpu')
  with pytest.raises(ValueError, match='out of range'):
    sampler.sample_from_edges(EdgeSamplerInput(torch.tensor([0]), torch.tensor([40])))


def test_negatives_past_the_memory_left_are_refused(monkeypatch):
  # An amount whose negatives alone outgrow memory is named before a batch
  # tries to allocate them (1 GiB left: 2 GiB of ids asked for).
  import graphlearn_torch.utils.memory as memory

  monkeypatch.setattr(memory, 'available_memory', lambda: (1 << 30, 'a test'))
  ds, _ = homo()
  for mode, amount in (('binary', 2**22), ('triplet', 2**23)):
    with pytest.raises(MemoryError, match=f'amount {amount} asks for {32 * amount:,} negatives'):
      LinkNeighborLoader(ds, [2], neg_sampling=(mode, amount), batch_size=32, device='cpu')
  from graphlearn_torch.distributed import DistLinkNeighborLoader

  with pytest.raises(MemoryError, match='asks for 134,217,728 negatives a batch of 32'):
    DistLinkNeighborLoader(None, [2], 32, torch.tensor([[0], [1]]), neg_sampling=('binary', 2**22))
  loader = LinkNeighborLoader(ds, [2], neg_sampling=('binary', 2**20), batch_size=32, device='cpu')
  assert loader.neg_sampling.count(32) == 2**25  # within the memory left: built
