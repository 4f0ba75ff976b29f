"""Feature gather and Dataset bookkeeping."""

import numpy as np
import pytest
import torch

from graphlearn_torch._ext import ops
from graphlearn_torch.data import Dataset, Feature, random_split
from graphlearn_torch.partition.partition_book import OffsetId2Index
from graphlearn_torch.utils import id2idx


@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.int64, torch.uint8])
def test_feature_gather_matches_indexing(dtype, thread_count):
  table = (torch.rand(1000, 37) * 100).to(dtype)
  ids = torch.randint(0, 1000, (5000,))
  for threads in (1, 2):
    torch.set_num_threads(threads)
    assert torch.equal(Feature(table, dtype=dtype)[ids], table[ids])


def test_feature_rows_take_the_shape_of_the_ids():
  table = torch.randn(10, 3)
  feat = Feature(table, with_gpu=False)
  ids = torch.tensor([[1, 4, 4], [9, 0, 2]])
  assert torch.equal(feat[ids], table[ids])  # [2, 3, 3], as indexing gives
  assert torch.equal(feat[torch.tensor(7)], table[7])
  assert torch.equal(feat[[3, 5]], table[[3, 5]])


def test_feature_with_id2index():
  ids = torch.tensor([7, 3, 9, 0])
  table = torch.arange(8, dtype=torch.float32).view(4, 2)
  feat = Feature(table, id2index=id2idx(ids))
  assert torch.equal(feat[torch.tensor([9, 7])], table[[2, 0]])
  with pytest.raises(ValueError, match='has no feature row'):
    feat[torch.tensor([5])]
  with pytest.raises(ValueError, match='out of range'):
    feat[torch.tensor([10])]


@pytest.mark.parametrize('part_dtype', [torch.int8, torch.int64])
def test_feature_gather_over_partitions_matches_indexing(part_dtype, thread_count):
  # Partition 0 holds its rows in id order (read through its row ranks),
  # partition 1 in shuffled order (through its id2index map), partition 2
  # a contiguous range (row = id - offset); partition 3 is remote.
  num_ids, dim = 160, 6
  table = torch.randn(num_ids, dim)
  owner = torch.randint(0, 2, (num_ids,), generator=torch.Generator().manual_seed(0))
  owner[:8] = 3
  owner[120:] = 2
  features = []
  for p in range(2):
    owned = (owner == p).nonzero().view(-1)
    if p == 1:
      owned = owned[torch.randperm(owned.numel(), generator=torch.Generator().manual_seed(2))]
    features.append(Feature(table[owned], id2index=id2idx(owned)))
  assert features[0].row_ranks() is not None and features[1].row_ranks() is None
  features.append(Feature(table[120:], id2index=OffsetId2Index(120)))
  features.append(None)
  ids = torch.randint(0, num_ids, (3000,), generator=torch.Generator().manual_seed(1))
  for threads in (1, 2):
    torch.set_num_threads(threads)
    out = features[0].cpu_get_partitioned(features, owner[ids].to(part_dtype), ids)
    held = owner[ids] != 3
    assert out.shape == (ids.numel(), dim)
    assert torch.equal(out[held], table[ids[held]])
    into = torch.full((ids.numel(), dim), 7.0)
    assert features[0].cpu_get_partitioned(features, owner[ids], ids, out=into) is into
    assert torch.equal(into[held], table[ids[held]]) and bool((into[~held] == 7.0).all())
  with pytest.raises(ValueError, match=r'out must be a contiguous CPU \[2, 6\] tensor of Float'):
    features[0].cpu_get_partitioned(features, torch.tensor([0, 0]), ids[:2], torch.empty(2, 5))
  with pytest.raises(ValueError, match='id 5 is in partition 4, outside the 4 partitions'):
    features[0].cpu_get_partitioned(features, torch.tensor([4]), torch.tensor([5]))
  wrong = int((owner == 1).nonzero()[0])
  with pytest.raises(ValueError, match=f'id {wrong} has no feature row in partition 0'):
    features[0].cpu_get_partitioned(features, torch.tensor([0]), torch.tensor([wrong]))
  # Every id is checked before a row is written: a bad id last leaves out as it was.
  good = int((owner == 0).nonzero()[0])
  into = torch.full((3, dim), 7.0)
  with pytest.raises(ValueError, match=f'id {wrong} has no feature row in partition 0'):
    features[0].cpu_get_partitioned(
      features, torch.tensor([0, 0, 0]), torch.tensor([good, good, wrong]), out=into
    )
  assert bool((into == 7.0).all())


def test_row_ranks_match_the_map():
  # Ids present where a random mask says, rows 0, 1, ... in id order; 200
  # ids end mid-word. Every id's row, through the ranks as the kernel reads
  # them, is the map's (-1: no row).
  present = torch.rand(200, generator=torch.Generator().manual_seed(0)) < 0.3
  id2index = torch.full((200,), -1, dtype=torch.int64)
  id2index[present] = torch.arange(int(present.sum()))
  ranks = ops.row_ranks(id2index)
  assert ranks.shape == (4, 2) and ranks.dtype == torch.int64
  for i in range(4 * 64):
    rows_before, bits = int(ranks[i // 64, 0]), int(ranks[i // 64, 1]) & (2**64 - 1)
    has = bits >> (i % 64) & 1
    row = rows_before + bin(bits & ((1 << (i % 64)) - 1)).count('1') if has else -1
    assert row == (int(id2index[i]) if i < 200 else -1), i
  # rows out of id order, or one skipped: no ranks
  assert ops.row_ranks(torch.tensor([1, 0, -1])) is None
  assert ops.row_ranks(torch.tensor([0, -1, 2])) is None
  assert ops.row_ranks(torch.empty(0, dtype=torch.int64)).shape == (0, 2)
  table = torch.arange(int(present.sum()), dtype=torch.float32)
  feature = Feature(table, id2index=id2index)
  ids = present.nonzero().view(-1)
  out = feature.cpu_get_partitioned([feature], torch.zeros_like(ids), ids)
  assert torch.equal(out.view(-1), table)
  absent = int((~present).nonzero()[0])
  with pytest.raises(ValueError, match=f'id {absent} has no feature row$'):
    feature.cpu_get_partitioned([feature], torch.tensor([0]), torch.tensor([absent]))
  with pytest.raises(ValueError, match='id 300 has no feature row$'):
    feature.cpu_get_partitioned([feature], torch.tensor([0]), torch.tensor([300]))
  # A plain lookup reads the ranks too (a peer's request for a partition's rows)
  assert torch.equal(feature.row_ranks(), ranks)
  picked = ids[torch.randint(0, ids.numel(), (500,), generator=torch.Generator().manual_seed(3))]
  assert torch.equal(feature[picked].view(-1), table[id2index[picked]])
  for bad in (absent, 300, -1):
    with pytest.raises(ValueError, match=f'id {bad} has no feature row$'):
      feature[torch.tensor([int(picked[0]), bad])]


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


def test_node_split_takes_ids_or_masks_and_names_bad_ids():
  ds = Dataset()
  mask = torch.tensor([True, False, True, True])
  ds.init_node_split((mask, np.array([1]), [0, 3]))
  assert ds.train_idx.tolist() == [0, 2, 3]  # a PyG mask: the positions it holds
  assert ds.val_idx.tolist() == [1] and ds.test_idx.dtype == torch.int64
  ds.init_node_split(({'paper': ~mask}, None, None))
  assert ds.train_idx['paper'].tolist() == [1] and ds.val_idx is None
  with pytest.raises(ValueError, match='train must hold integer node ids or a boolean mask'):
    ds.init_node_split((torch.tensor([0.0, 2.0]), None, None))
  with pytest.raises(ValueError, match=r"val\['paper'\] holds a negative node id: -2"):
    ds.init_node_split((None, {'paper': torch.tensor([1, -2])}, None))


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
