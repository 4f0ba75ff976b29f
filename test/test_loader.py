"""NeighborLoader output against the full graph, features and labels."""

import pytest
import torch
from conftest import random_edges
from torch_geometric.data import Data, HeteroData

from graphlearn_torch.data import Dataset
from graphlearn_torch.loader import NeighborLoader
from graphlearn_torch.typing import reverse_edge_type


def homo_dataset(edge_dir='out', n=60, e=500):
  ei = random_edges(n, n, e, seed=11)
  ds = Dataset(edge_dir=edge_dir)
  ds.init_graph(ei, graph_mode='CPU', num_nodes=n)
  ds.init_node_features(torch.randn(n, 8))
  ds.init_edge_features(torch.randn(e, 3))
  ds.init_node_labels(torch.randint(0, 4, (n,)))
  return ds, ei


@pytest.mark.parametrize('edge_dir', ['out', 'in'])
def test_homo_batches_map_back_to_the_graph(edge_dir):
  ds, ei = homo_dataset(edge_dir)
  seeds = torch.arange(0, 60, 3)
  loader = NeighborLoader(
    ds, [4, 3], seeds, batch_size=7, shuffle=True, with_edge=True, device='cpu', seed=0
  )
  assert len(loader) == 3
  covered = []
  for batch in loader:
    assert isinstance(batch, Data)
    n_id, e_id = batch.n_id, batch.e_id
    assert torch.equal(n_id[: batch.batch_size], seeds[batch.input_id])
    covered.append(n_id[: batch.batch_size])
    src, dst = n_id[batch.edge_index[0]], n_id[batch.edge_index[1]]
    # message passing order: edge_index[0] is the neighbor
    if edge_dir == 'out':
      assert torch.equal(ei[:, e_id], torch.stack([dst, src]))
    else:
      assert torch.equal(ei[:, e_id], torch.stack([src, dst]))
    assert torch.equal(batch.x, ds.node_features.feature_tensor[n_id])
    assert torch.equal(batch.y, ds.node_labels[n_id])
    assert torch.equal(batch.edge_attr, ds.edge_features.feature_tensor[e_id])
    assert sum(batch.num_sampled_nodes) == batch.num_nodes
    assert sum(batch.num_sampled_edges) == batch.edge_index.size(1)
  assert sorted(torch.cat(covered).tolist()) == seeds.tolist()


def test_mask_input_drop_last_and_epochs():
  ds, _ = homo_dataset()
  mask = torch.zeros(60, dtype=torch.bool)
  mask[:25] = True
  loader = NeighborLoader(ds, [2], mask, batch_size=10, drop_last=True, device='cpu')
  assert len(loader) == 2
  for _ in range(2):  # every epoch restarts
    sizes = [b.batch_size for b in loader]
    assert sizes == [10, 10]


def test_seeded_loader_is_reproducible():
  ds, _ = homo_dataset()

  def run():
    loader = NeighborLoader(ds, [3, 3], None, batch_size=16, shuffle=True, device='cpu', seed=5)
    return [b.n_id for b in loader]

  for a, b in zip(run(), run()):
    assert torch.equal(a, b)


def test_as_pyg_v1_adjs():
  ds, ei = homo_dataset('in')
  loader = NeighborLoader(
    ds, [3, 2], torch.arange(8), batch_size=8, with_edge=True, as_pyg_v1=True, device='cpu'
  )
  batch_size, n_id, adjs = next(iter(loader))
  assert batch_size == 8 and len(adjs) == 2
  outer, inner = adjs
  assert inner.size[1] == 8  # the last layer targets the seeds
  assert outer.size[1] == inner.size[0]
  for adj in adjs:
    src, dst = n_id[adj.edge_index[0]], n_id[adj.edge_index[1]]
    assert torch.equal(ei[:, adj.e_id], torch.stack([src, dst]))
    assert int(adj.edge_index[1].max()) < adj.size[1]
    assert int(adj.edge_index[0].max()) < adj.size[0]


@pytest.mark.parametrize('edge_dir', ['out', 'in'])
def test_hetero_batches(edge_dir):
  counts = {'paper': 30, 'author': 20}
  edges = {
    ('author', 'writes', 'paper'): random_edges(20, 30, 120, seed=1),
    ('paper', 'cites', 'paper'): random_edges(30, 30, 90, seed=2),
  }
  ds = Dataset(edge_dir=edge_dir)
  ds.init_graph(edges, graph_mode='CPU', num_nodes=counts)
  ds.init_node_features({t: torch.randn(n, 4) for t, n in counts.items()})
  ds.init_node_labels({'paper': torch.arange(30) % 3})
  ds.init_edge_features({et: torch.randn(e.size(1), 2) for et, e in edges.items()})
  seed_type = 'paper' if edge_dir == 'in' else 'author'
  loader = NeighborLoader(
    ds, [3, 2], (seed_type, torch.arange(10)), batch_size=4, with_edge=True, device='cpu'
  )
  for batch in loader:
    assert isinstance(batch, HeteroData)
    assert batch[seed_type].batch_size == batch[seed_type].input_id.numel()
    for t in counts:
      if t in batch.node_types and batch[t].num_nodes:
        assert torch.equal(batch[t].x, ds.node_features[t].feature_tensor[batch[t].n_id])
    if 'paper' in batch.node_types:
      assert torch.equal(batch['paper'].y, ds.node_labels['paper'][batch['paper'].n_id])
    for et in batch.edge_types:
      orig = reverse_edge_type(et) if edge_dir == 'out' else et
      src_ids = batch[et[0]].n_id[batch[et].edge_index[0]]
      dst_ids = batch[et[-1]].n_id[batch[et].edge_index[1]]
      pair = torch.stack([dst_ids, src_ids] if edge_dir == 'out' else [src_ids, dst_ids])
      assert torch.equal(edges[orig][:, batch[et].e_id], pair)
      assert torch.equal(batch[et].edge_attr, ds.edge_features[orig].feature_tensor[batch[et].e_id])


def test_a_failed_row_fetch_fails_the_batch_while_another_is_pending():
  # torch.futures.collect_all fails as soon as one future fails (an RPC to a
  # lost peer), while the others may still run: the batch's future carries
  # that failure, not an error about reading an unfinished future.
  from graphlearn_torch.batch import SampledBatch, collect_features
  from graphlearn_torch.sampler import NeighborSampler, NodeSamplerInput

  ds, _ = homo_dataset()
  sampler = NeighborSampler(ds.graph, [3], device='cpu', with_edge=True, edge_dir='out', seed=0)
  batch = SampledBatch.from_output(sampler.sample_from_nodes(NodeSamplerInput(torch.arange(4))))
  started = torch.futures.Future()

  def lost_peer(_):
    raise RuntimeError('peer 10.0.0.9 is gone')

  never = torch.futures.Future()
  fut = collect_features(
    batch,
    ds,
    node_rows=lambda ids, t, c, host_ids=None: never,
    edge_rows=lambda ids, t, c, host_ids=None: started.then(lost_peer),
  )
  started.set_result(None)
  assert fut.done()
  with pytest.raises(RuntimeError, match='peer 10.0.0.9 is gone'):
    fut.wait()
