"""The streaming partitioner's parts against brute force: the adjacency
blocks, the graph of clusters, the capacity-bound moves, the cut it tracks,
and its balance constraints."""

import numpy as np
import pytest
import torch
from conftest import random_edges

import graphlearn_torch as glt
from graphlearn_torch.partition import StreamingPartitioner
from graphlearn_torch.partition.adjacency_blocks import BlockedAdjacency, contract
from graphlearn_torch.partition.label_propagation import Moves, accept_within
from graphlearn_torch.partition.streaming_partitioner import greedy_pack


def symmetric_pairs(edges: torch.Tensor, num_nodes: int) -> torch.Tensor:
  """The sorted keys ``src * num_nodes + dst`` of both directions of every
  edge that is not a self-loop (duplicates kept)."""
  keep = edges[0] != edges[1]
  src = torch.cat([edges[0][keep], edges[1][keep]])
  dst = torch.cat([edges[1][keep], edges[0][keep]])
  return torch.sort(src * num_nodes + dst).values


def chunks_of(edges: torch.Tensor, size: int):
  return lambda: (
    (edges[0][s : s + size], edges[1][s : s + size]) for s in range(0, edges.size(1), size)
  )


def test_spilled_blocks_hold_each_nodes_edges(tmp_path):
  num_nodes = 500
  edges = random_edges(num_nodes, num_nodes, 4000, 0)
  adjacency = BlockedAdjacency.spill(num_nodes, chunks_of(edges, 333), str(tmp_path), 700)
  assert adjacency.num_blocks > 5
  assert adjacency.starts[0] == 0 and adjacency.starts[-1] == num_nodes
  keys = []
  for block in adjacency:
    assert block.src.min() >= 0 and block.src.max() < block.stop - block.start
    keys.append((block.src + block.start) * num_nodes + block.dst)
  expected = symmetric_pairs(edges, num_nodes)
  assert torch.equal(torch.sort(torch.cat(keys)).values, expected)
  assert adjacency.total_weight == expected.numel()


def test_contract_sums_edges_between_labels(tmp_path):
  num_nodes, num_labels = 300, 17
  edges = random_edges(num_nodes, num_nodes, 2000, 1)
  adjacency = BlockedAdjacency.spill(num_nodes, chunks_of(edges, 500), str(tmp_path), 400)
  label = torch.randint(0, num_labels, (num_nodes,), generator=torch.Generator().manual_seed(0))
  src, dst, weight = contract(adjacency, label, num_labels, max_edges=10_000)
  dense = torch.zeros(num_labels, num_labels, dtype=torch.int64)
  keep = edges[0] != edges[1]
  a, b = label[edges[0][keep]], label[edges[1][keep]]
  dense.index_put_((a, b), torch.ones_like(a), accumulate=True)
  dense.index_put_((b, a), torch.ones_like(a), accumulate=True)
  dense.fill_diagonal_(0)
  got = torch.zeros_like(dense)
  got[src, dst] = weight
  assert torch.equal(got, dense)
  assert torch.equal(src, torch.sort(src).values)
  # Past the edge bound, no graph.
  assert contract(adjacency, label, num_labels, max_edges=20) is None
  # The in-memory blocks of that graph hold the same edges.
  coarse = BlockedAdjacency.in_memory(num_labels, src, dst, weight, 30)
  assert coarse.num_blocks > 1 and coarse.total_weight == int(dense.sum())
  again = torch.zeros_like(dense)
  for block in coarse:
    again[block.src + block.start, block.dst] = block.weights()
  assert torch.equal(again, dense)


def test_moves_are_taken_best_first_while_they_fit():
  g = torch.Generator().manual_seed(2)
  num_nodes, num_labels = 400, 6
  node_weight = torch.randint(1, 5, (num_nodes, 2), generator=g)
  load = torch.randint(0, 60, (num_labels, 2), generator=g)
  cap = torch.tensor([150, 140])
  moves = Moves(
    torch.randperm(num_nodes, generator=g)[:300],
    torch.randint(0, num_labels, (300,), generator=g),
    torch.rand(300, generator=g),
  )
  taken = accept_within(moves, node_weight, load, cap)
  for target in range(num_labels):
    mine = moves.target == target
    order = torch.argsort(moves.gain[mine], descending=True)
    nodes = moves.node[mine][order]
    running = load[target] + torch.cumsum(node_weight[nodes], 0)
    fits = (running <= cap).all(dim=1)
    prefix = int(fits.long().cumprod(0).sum())  # the best moves up to the first that does not fit
    expected = set(nodes[:prefix].tolist())
    assert set(taken.node[taken.target == target].tolist()) == expected


def test_greedy_pack_balances_every_column():
  g = torch.Generator().manual_seed(3)
  weight = torch.randint(1, 50, (5000, 2), generator=g)
  weight[:5] *= 40  # a few heavy clusters
  part = greedy_pack(weight, 4, g)
  load = torch.zeros(4, 2, dtype=torch.int64).index_add_(0, part, weight)
  assert (load.max(0).values / load.double().mean(0)).max() <= 1.02


def community(num_nodes, seed=0):
  data = glt.datasets.community_graph(
    num_nodes, num_classes=8, avg_degree=10, feature_dim=1, homophily=0.9, seed=seed
  )
  return data.edge_index, data.train_mask.nonzero().view(-1)


# METIS splits the clusters' graph, or (without pymetis, or past
# max_coarse_edges) the clusters are packed greedily: a cut nearer random's.
@pytest.mark.parametrize(
  'coarse,max_coarse_edges,most',
  [('metis', 1 << 24, 0.4), ('greedy', 1 << 24, 0.7), ('metis', 100, 0.7)],
)
def test_cut_tracked_by_the_passes_is_the_cut_written(tmp_path, coarse, max_coarse_edges, most):
  num_nodes = 20_000
  edge_index, train = community(num_nodes)
  partitioner = StreamingPartitioner(
    str(tmp_path), 4, num_nodes, edge_index, node_split=(train, None, None), balance_train=True,
    coarse=coarse, max_coarse_edges=max_coarse_edges, max_block_edges=50_000, progress=False,
  )  # fmt: skip
  summary = partitioner.partition()
  stages = [stage for stage, _, _ in partitioner.passes]
  assert stages[0] == 'cluster' and 'split' in stages and stages[-1] == 'refine'
  assert partitioner.passes[-1][2] == pytest.approx(summary.cut_ratio, abs=1e-9)
  # Refinement lowers the cut.
  cuts = [cut for stage, _, cut in partitioner.passes if stage in ('split', 'refine')]
  assert cuts[-1] <= cuts[0]
  assert summary.node_balance() <= 1.05 and summary.train_balance() <= 1.05
  random_cut = 0.75  # 4 parts
  assert summary.cut_ratio <= most * random_cut


def test_hetero_types_each_balanced(tmp_path):
  sizes = {'user': 3000, 'item': 1000}
  etypes = [('user', 'buys', 'item'), ('item', 'sold_to', 'user'), ('user', 'follows', 'user')]
  edges = {e: random_edges(sizes[e[0]], sizes[e[-1]], 8000, i) for i, e in enumerate(etypes)}
  summary = StreamingPartitioner(
    str(tmp_path), 2, sizes, edges, max_block_edges=2000, progress=False
  ).partition()
  for ntype in sizes:
    assert summary.node_balance(ntype) <= 1.05


def test_bad_arguments_are_named(tmp_path):
  edges = random_edges(10, 10, 30, 0)
  with pytest.raises(ValueError, match='coarse'):
    StreamingPartitioner(str(tmp_path), 2, 10, edges, coarse='spectral')
  with pytest.raises(ValueError, match='cluster_factor'):
    StreamingPartitioner(str(tmp_path), 2, 10, edges, cluster_factor=0)
  with pytest.raises(ValueError, match='balance_train'):
    StreamingPartitioner(str(tmp_path), 2, 10, edges, balance_train=True)


def test_graph_without_edges_and_one_part(tmp_path):
  empty = torch.empty(2, 0, dtype=torch.int64)
  summary = StreamingPartitioner(str(tmp_path / 'a'), 3, 100, empty, progress=False).partition()
  assert summary.node_balance() <= 1.05
  one = StreamingPartitioner(
    str(tmp_path / 'b'), 1, 50, random_edges(50, 50, 200, 0), progress=False
  ).partition()
  assert one.nodes['_N'] == [50]


def test_memory_mapped_edges_are_read_in_chunks(tmp_path):
  num_nodes = 5000
  edge_index, _ = community(num_nodes, seed=4)
  np.save(tmp_path / 'edges.npy', edge_index.numpy())
  mapped = np.load(tmp_path / 'edges.npy', mmap_mode='r')
  from_file = StreamingPartitioner(
    str(tmp_path / 'mapped'), 2, num_nodes, mapped, seed=1, progress=False
  ).partition()
  in_memory = StreamingPartitioner(
    str(tmp_path / 'memory'), 2, num_nodes, edge_index, seed=1, progress=False
  ).partition()
  assert from_file.nodes == in_memory.nodes and from_file.cut_edges == in_memory.cut_edges
