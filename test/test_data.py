"""Feature gather and Dataset bookkeeping."""

import numpy as np
import pytest
import torch

from graphlearn_torch.data import Dataset, Feature, random_split
from graphlearn_torch.utils import id2idx


@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.int64, torch.uint8])
def test_feature_gather_matches_indexing(dtype, thread_count):
  table = (torch.rand(1000, 37) * 100).to(dtype)
  ids = torch.randint(0, 1000, (5000,))
  for threads in (1, 2):
    torch.set_num_threads(threads)
    assert torch.equal(Feature(table, dtype=dtype)[ids], table[ids])


def test_feature_with_id2index():
  ids = torch.tensor([7, 3, 9, 0])
  table = torch.arange(8, dtype=torch.float32).view(4, 2)
  feat = Feature(table, id2index=id2idx(ids))
  assert torch.equal(feat[torch.tensor([9, 7])], table[[2, 0]])
  with pytest.raises(ValueError, match='has no feature row'):
    feat[torch.tensor([5])]
  with pytest.raises(ValueError, match='out of range'):
    feat[torch.tensor([10])]


def test_feature_gather_at_positions():
  table = torch.randn(100, 5)
  feat = Feature(table, id2index=id2idx(torch.arange(100).flip(0)))
  ids = torch.randint(0, 100, (30,))
  positions = torch.randperm(50)[:30]
  out = feat.cpu_get_at(ids, positions, 50)
  assert out.shape == (50, 5)
  assert torch.equal(out[positions], table[99 - ids])  # through id2index
  with pytest.raises(ValueError, match='positions holds ids outside'):
    feat.cpu_get_at(ids, positions + 50, 50)
  with pytest.raises(ValueError, match='positions holds 29 entries for 30 ids'):
    feat.cpu_get_at(ids, positions[:29], 50)
  # no rows of its own (every row is a peer's): still num_rows rows to fill
  none = torch.empty(0, dtype=torch.int64)
  assert feat.cpu_get_at(none, none, 7).shape == (7, table.size(1))


def test_dataset_accessors_and_numpy_input():
  ds = Dataset()
  ds.init_graph(np.array([[0, 1, 2], [1, 2, 3]]), graph_mode='CPU')
  ds.init_node_features(np.ones((6, 2), dtype=np.float32))
  # features for more nodes than the edges mention make those nodes samplable
  assert ds.num_nodes() == 6 and ds.get_graph().row_count == 6
  ds.init_node_labels(torch.tensor([[0], [1], [0], [1], [0], [1]]))
  assert ds.get_node_label().shape == (6,)
  ds.random_node_split(0.2, 2)
  parts = torch.cat([ds.train_idx, ds.val_idx, ds.test_idx])
  assert sorted(parts.tolist()) == list(range(6))
  assert ds.val_idx.numel() == 1 and ds.test_idx.numel() == 2
  assert ds.get_node_types() is None and ds.get_edge_types() is None


def test_random_split_sizes():
  train, val, test = random_split(100, 0.1, 30)
  assert (train.numel(), val.numel(), test.numel()) == (60, 10, 30)
  with pytest.raises(ValueError):
    random_split(10, 6, 6)


def test_hetero_dataset_types():
  ds = Dataset(edge_dir='in')
  ds.init_graph(
    {('a', 'r', 'b'): torch.tensor([[0, 1], [2, 3]]), ('b', 's', 'b'): torch.tensor([[0], [1]])},
    graph_mode='CPU',
  )
  assert ds.get_node_types() == ['a', 'b']
  assert set(ds.get_edge_types()) == {('a', 'r', 'b'), ('b', 's', 'b')}
  assert ds.num_nodes('b') == 4 and ds.num_nodes('a') == 2
  # 'in' sampling: rows of every topology are destinations
  assert ds.get_graph(('a', 'r', 'b')).topo.layout == 'CSC'
  assert ds.get_graph(('b', 's', 'b')).row_count == 4


def test_share_ipc_round_trip():
  ds = Dataset()
  ds.init_graph(torch.tensor([[0, 1], [1, 2]]), graph_mode='CPU')
  ds.init_node_features(torch.randn(3, 4))
  ds.init_node_labels(torch.tensor([0, 1, 2]))
  again = Dataset.from_ipc_handle(ds.share_ipc())
  assert torch.equal(again.get_graph().topo.indices, ds.get_graph().topo.indices)
  assert torch.equal(again.node_features[torch.arange(3)], ds.node_features[torch.arange(3)])
  assert again.get_graph().topo.indices.is_shared()


def _sample_in_child(ds, queue):
  from graphlearn_torch.loader import NeighborLoader

  batch = next(iter(NeighborLoader(ds, [2], torch.tensor([0, 1]), batch_size=2, device='cpu')))
  # plain lists: tensors put on a queue live only as long as this process
  queue.put((ds.get_graph().topo.indices.is_shared(), batch.x.tolist(), batch.n_id.tolist()))


def test_dataset_travels_to_a_spawned_process_through_shared_memory():
  import torch.multiprocessing as mp

  ds = Dataset()
  ds.init_graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), graph_mode='CPU')
  ds.init_node_features(torch.arange(12, dtype=torch.float32).view(3, 4))
  ctx = mp.get_context('spawn')
  queue = ctx.Queue()
  proc = ctx.Process(target=_sample_in_child, args=(ds, queue))
  proc.start()
  try:
    shared, x, n_id = queue.get(timeout=120)
  finally:
    proc.join(timeout=30)
    if proc.is_alive():
      proc.kill()
      proc.join()
  assert proc.exitcode == 0 and shared
  assert torch.equal(torch.tensor(x), ds.node_features[torch.tensor(n_id)])
