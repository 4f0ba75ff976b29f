"""GLT 0.2.x behaviour that GLT scripts rely on, checked against what GLT
documents (names, tuple orders, output layouts), with brute-force references."""

import multiprocessing
import os
import socket

import numpy as np
import pytest
import torch

import graphlearn_torch as glt
from graphlearn_torch.data import Dataset, Graph, Topology
from graphlearn_torch.loader import LinkNeighborLoader, NeighborLoader
from graphlearn_torch.partition import (
  FeaturePartitionData,
  GLTPartitionBook,
  RangePartitionBook,
  cat_feature_cache,
)
from graphlearn_torch.sampler import NeighborSampler, NodeSamplerInput

# -- 1. public names ------------------------------------------------------------


def test_typing_names_at_package_level():
  for name in (
    'NodeType', 'EdgeType', 'TensorDataType', 'NodeLabel', 'NodeIndex', 'Split',
    'GraphPartitionData', 'FeaturePartitionData', 'HeteroGraphPartitionData',
    'HeteroFeaturePartitionData', 'Seeds', 'InputNodes', 'EdgeIndexTensor', 'InputEdges',
    'NumNeighbors', 'as_str', 'reverse_edge_type',
  ):  # fmt: skip
    assert getattr(glt, name) is getattr(glt.typing, name), name
  assert glt.reverse_edge_type(('user', 'buys', 'item')) == ('item', 'rev_buys', 'user')
  assert glt.reverse_edge_type(('item', 'rev_buys', 'user')) == ('user', 'buys', 'item')
  assert glt.as_str(('a', 'b', 'c')) == 'a__b__c'
  assert glt.GraphPartitionData is glt.partition.GraphPartitionData


def test_utils_names():
  u = glt.utils
  a = torch.arange(4)
  assert u.tensor_equal_with_device(a, a.clone())
  assert not u.tensor_equal_with_device(a, a + 1)
  port = u.get_free_port()
  with socket.socket() as s:
    s.bind(('localhost', port))  # it was free
  assert port not in u.ephemeral_ports()  # and no connection's local end can take it
  run = u.get_free_port('127.0.0.1', 3)
  for p in range(run, run + 3):
    assert p not in u.ephemeral_ports()
    with socket.socket() as s:
      s.bind(('127.0.0.1', p))
  assert u.parse_size('1GB') == 2**30 and u.parse_size('64KB') == 65536 and u.parse_size(7) == 7
  assert torch.equal(u.id2idx(torch.tensor([5, 2, 7]))[[5, 2, 7]], torch.tensor([0, 1, 2]))
  assert torch.equal(u.ptr2ind(torch.tensor([0, 2, 2, 3])), torch.tensor([0, 0, 2]))
  nested = {'a': [torch.ones(2), (torch.zeros(1), 'x')]}
  doubled = u.apply_to_all_tensor(nested, torch.mul, 2)
  assert torch.equal(doubled['a'][0], torch.full((2,), 2.0)) and doubled['a'][1][1] == 'x'
  assert u.share_memory(nested)['a'][0].is_shared()
  assert torch.equal(u.index_select({'k': torch.arange(5)}, (1, 3))['k'], torch.tensor([1, 2]))
  merged = {}
  u.merge_dict({'t': 1}, merged)
  u.merge_dict({'t': 2}, merged)
  assert merged == {'t': [1, 2]}
  counts = {}
  u.count_dict({'t': [1, 2]}, counts, 3)
  assert counts == {'t': [0, 0, 2]}  # padded to target_len - 1, then the count
  assert u.get_available_device().type == ('cuda' if torch.cuda.is_available() else 'cpu')
  assert u.assign_device().type == ('cuda' if torch.cuda.is_available() else 'cpu')

  @u.singleton
  class One:
    pass

  assert One() is One()
  assert NodeSamplerInput.cast((torch.tensor([1]), 'paper')).input_type == 'paper'
  assert issubclass(NodeSamplerInput, u.CastMixin)


def test_ensure_dir_and_seed_everything(tmp_path):
  target = tmp_path / 'a' / 'b'
  glt.utils.ensure_dir(str(target))
  glt.utils.ensure_dir(str(target))  # twice is fine
  assert target.is_dir()
  draws = []
  for _ in range(2):
    glt.utils.seed_everything(3)
    draws.append((np.random.rand(), torch.rand(1).item(), __import__('random').random()))
  assert draws[0] == draws[1]


@pytest.mark.parametrize('sizes', [None, (12, 15)])
def test_coo_to_csr_and_csc_against_brute_force(sizes):
  gen = torch.Generator().manual_seed(0)
  row, col = torch.randint(0, 10, (60,), generator=gen), torch.randint(0, 12, (60,), generator=gen)
  eid, weight = torch.arange(100, 160), torch.rand(60, generator=gen)
  rowptr, cols, eids, weights = glt.utils.coo_to_csr(row, col, eid, weight, sizes)
  num_rows = sizes[0] if sizes else int(row.max()) + 1
  assert rowptr.numel() == num_rows + 1
  expect = sorted(zip(row.tolist(), col.tolist(), eid.tolist()))
  rows = glt.utils.ptr2ind(rowptr)
  assert sorted(zip(rows.tolist(), cols.tolist(), eids.tolist())) == expect
  for r in range(num_rows):  # columns sorted within a row
    seg = cols[rowptr[r] : rowptr[r + 1]]
    assert bool((seg[1:] >= seg[:-1]).all())
  assert torch.equal(weights, weight[eids - 100])
  crow, colptr, ceids, _ = glt.utils.coo_to_csc(row, col, eid, None, sizes)
  assert colptr.numel() == (sizes[1] if sizes else int(col.max()) + 1) + 1
  ccol = glt.utils.ptr2ind(colptr)
  assert sorted(zip(crow.tolist(), ccol.tolist(), ceids.tolist())) == expect


def test_data_names_and_sort_by_in_degree():
  assert glt.data.PartitionBook is glt.partition.PartitionBook
  assert issubclass(RangePartitionBook, glt.data.PartitionBook)
  assert callable(glt.distributed.DistRandomPartitioner.partition)
  # degrees 1, 3, 0, 2 for rows 0..3 (CSC: in-degrees)
  ei = torch.tensor([[1, 0, 2, 3, 0, 2], [0, 1, 1, 1, 3, 3]])
  topo = Topology(ei, layout='CSC')
  table = torch.arange(5.0).view(5, 1) * 10  # one row more than the topology has
  reordered, old2new = glt.data.sort_by_in_degree(table, 0.0, topo)
  assert reordered.view(-1).tolist() == [10.0, 30.0, 0.0, 20.0, 40.0]  # hottest first, 4 stays
  assert torch.equal(reordered[old2new], table)
  assert glt.data.sort_by_in_degree(table, 0.5, None) == (table, None)
  torch.manual_seed(1)
  shuffled, old2new = glt.data.sort_by_in_degree(table, 0.5, topo)
  assert set(shuffled[:2].view(-1).tolist()) == {10.0, 30.0}  # the top half permuted in place
  assert shuffled[2:].view(-1).tolist() == [0.0, 20.0, 40.0]
  assert torch.equal(shuffled[old2new], table)


# -- 2. CSC and CSR tuples -------------------------------------------------------


def test_topology_csc_and_csr_tuples_in_glt_order():
  # 0->1, 0->2, 1->2, 3->2 ; CSC over destinations: row (sources), colptr
  row = torch.tensor([0, 0, 1, 3])
  colptr = torch.tensor([0, 0, 1, 4])
  topo = Topology(edge_index=(row, colptr), input_layout='CSC', layout='CSC')
  assert torch.equal(topo.indptr, colptr) and torch.equal(topo.indices, row)
  out_row, out_colptr, eids, weights = topo.to_csc()
  assert torch.equal(out_row, row) and torch.equal(out_colptr, colptr) and weights is None
  rowptr, col, _, _ = topo.to_csr()
  assert torch.equal(rowptr, torch.tensor([0, 2, 3, 3, 4]))
  assert torch.equal(col, torch.tensor([1, 2, 2, 2]))
  csr = Topology(edge_index=(rowptr, col), input_layout='CSR', layout='CSC')
  assert torch.equal(csr.to_csc()[0], row) and torch.equal(csr.to_csc()[1], colptr)
  with pytest.raises(ValueError, match='CSC indptr'):
    Topology(edge_index=(colptr, row), input_layout='CSC')  # the old order is refused


# -- 3. subgraph ---------------------------------------------------------------


def test_subgraph_sorted_nodes_mapping_and_edge_order():
  ei = torch.tensor([[0, 0, 1, 2, 2, 3, 4], [1, 2, 2, 0, 4, 5, 0]])
  graph = Graph(Topology(ei), 'CPU')
  sampler = NeighborSampler(graph, device='cpu', with_edge=True)
  out = sampler.subgraph(NodeSamplerInput(torch.tensor([0, 2, 1, 2, 4])))
  assert out.node.tolist() == [0, 1, 2, 4]
  assert torch.equal(out.metadata, torch.tensor([0, 2, 1, 2, 3]))  # bare mapping tensor
  # brute force, row by row of the sorted nodes: (src, dst) with both inside
  local = {v: i for i, v in enumerate(out.node.tolist())}
  expect = [
    (local[s], local[d], e) for e, (s, d) in enumerate(ei.t().tolist()) if s in local and d in local
  ]
  got = list(zip(out.col.tolist(), out.row.tolist(), out.edge.tolist()))  # row: neighbor side
  assert got == sorted(expect)
  # node 5 has no out-edges (beyond the topology's rows): no neighbours, no error
  out = sampler.subgraph(NodeSamplerInput(torch.tensor([5, 3])))
  assert out.node.tolist() == [3, 5] and out.row.tolist() == [1] and out.col.tolist() == [0]


# -- 4. heterogeneous sampler output --------------------------------------------


def hetero_dataset(edge_dir='out'):
  edges = {
    ('user', 'buys', 'item'): torch.tensor([[0, 0, 1, 2], [0, 1, 1, 2]]),
    ('item', 'made_by', 'shop'): torch.tensor([[0, 1, 2], [0, 0, 1]]),
    ('user', 'follows', 'user'): torch.tensor([[0, 1], [1, 2]]),
    ('ghost', 'haunts', 'user'): torch.tensor([[0], [2]]),
  }
  ds = Dataset(edge_dir=edge_dir)
  ds.init_graph(edges, graph_mode='CPU', num_nodes={'user': 3, 'item': 3, 'shop': 2, 'ghost': 1})
  sizes = {'user': 3, 'item': 3, 'shop': 2, 'ghost': 1}
  ds.init_node_features({t: torch.randn(n, 4) for t, n in sizes.items()})
  return ds, edges


def test_hetero_output_lists_only_sampled_types():
  ds, _ = hetero_dataset('out')
  sampler = NeighborSampler(ds.graph, [2, 2], device='CPU', seed=0)  # GLT-style device string
  out = sampler.sample_from_nodes(NodeSamplerInput(torch.tensor([0]), 'user'))
  # users reach items, then shops; 'ghost' is never reached (it only points at users)
  assert set(out.node) == {'user', 'item', 'shop'}
  assert ('user', 'rev_haunts', 'ghost') not in out.row and 'ghost' not in out.num_sampled_nodes
  assert set(out.row) == set(out.num_sampled_edges)
  for etype in out.row:
    assert out.row[etype].numel() > 0
  # edge_types names every output type of the graph, sampled or not (as GLT's)
  assert len(out.edge_types) == 4 and ('user', 'rev_haunts', 'ghost') in out.edge_types
  full = out.with_every_type()
  assert full.node['ghost'].numel() == 0 and full.row[('user', 'rev_haunts', 'ghost')].numel() == 0
  # per-hop counts are tensors covering the hops where the type appeared
  assert out.num_sampled_nodes['user'][0].item() == 1
  assert out.num_sampled_nodes['item'].size(0) == 2  # hop 0: none, hop 1: items
  assert out.num_sampled_nodes['item'][0].item() == 0
  assert out.num_sampled_nodes['shop'].size(0) == 3
  for ntype, counts in out.num_sampled_nodes.items():
    assert isinstance(counts, torch.Tensor) and int(counts.sum()) == out.node[ntype].numel()
    assert counts[-1].item() > 0
  assert torch.equal(out.batch['user'], torch.tensor([0]))


# -- 5. batch fields ------------------------------------------------------------


def test_batches_carry_glt_names():
  ei = torch.tensor([[0, 1, 2, 3, 4, 0], [1, 2, 3, 4, 0, 2]])
  ds = Dataset(edge_dir='out')
  ds.init_graph(ei, graph_mode='CPU', num_nodes=5)
  ds.init_node_features(torch.randn(5, 3))
  loader = NeighborLoader(
    ds, [2], torch.tensor([3, 0, 3]), batch_size=3, with_edge=True, device='cpu'
  )
  batch = next(iter(loader))
  assert batch.node.data_ptr() == batch.n_id.data_ptr()  # aliases, no copies
  assert batch.edge.data_ptr() == batch.e_id.data_ptr()
  assert batch.batch.tolist() == [3, 0]  # the (deduplicated) seeds
  ds_h, edges = hetero_dataset('out')
  hetero = next(iter(NeighborLoader(ds_h, [1, 1], ('user', torch.tensor([2])), device='cpu')))
  # not reached: empty, but there (PyG's layout; HeteroConv and to_hetero need every type)
  assert hetero['ghost'].n_id.numel() == 0 and hetero['ghost'].x.shape == (0, 4)
  assert hetero[('user', 'rev_haunts', 'ghost')].edge_index.shape == (2, 0)
  assert hetero['user'].node.data_ptr() == hetero['user'].n_id.data_ptr()
  assert hetero['user'].batch.tolist() == [2]
  # GLT's batch-level per-type counts, padded to every hop (tests call .size(0))
  assert hetero.num_sampled_nodes['user'].size(0) == 3
  assert hetero.num_sampled_nodes['user'].tolist() == hetero['user'].num_sampled_nodes


@pytest.mark.parametrize('edge_dir', ['out', 'in'])
def test_hetero_link_labels_on_the_reversed_type_for_out(edge_dir):
  ds, edges = hetero_dataset(edge_dir)
  etype = ('user', 'buys', 'item')
  loader = LinkNeighborLoader(
    ds,
    [1],
    edge_label_index=(etype, edges[etype]),
    neg_sampling='binary',
    batch_size=4,
    device='cpu',
  )
  batch = next(iter(loader))
  if edge_dir == 'out':
    store = batch[('item', 'rev_buys', 'user')]
    dst_local, src_local = store.edge_label_index
  else:
    store = batch[etype]
    src_local, dst_local = store.edge_label_index
  assert 'edge_label_index' not in batch[etype] or edge_dir == 'in'
  src, dst = batch['user'].n_id[src_local], batch['item'].n_id[dst_local]
  assert torch.equal(torch.stack([src[:4], dst[:4]]), edges[etype][:, store.input_id])
  assert store.edge_label.tolist() == [1.0] * 4 + [0.0] * 4


# -- 6. cat_feature_cache -----------------------------------------------------------


def test_cat_feature_cache_returns_ratio_and_prefers_the_cache_row():
  book = torch.tensor([0, 0, 1, 1, 1, 0])
  own = FeaturePartitionData(
    feats=torch.tensor([[0.0], [1.0], [5.0]]),
    ids=torch.tensor([0, 1, 5]),
    cache_feats=torch.tensor([[3.5], [1.5]]),
    cache_ids=torch.tensor([3, 1]),  # 1 is both owned and cached
  )
  ratio, feats, id2index, pb = cat_feature_cache(0, own, GLTPartitionBook(book))
  assert ratio == pytest.approx(2 / 5)
  assert feats.view(-1).tolist() == [3.5, 1.5, 0.0, 1.0, 5.0]  # cache first
  assert id2index[3].item() == 0 and id2index[1].item() == 1  # the cache row wins
  assert id2index[0].item() == 2 and id2index[5].item() == 4
  assert torch.as_tensor(pb)[3].item() == 0 and torch.as_tensor(pb)[2].item() == 1
  plain = FeaturePartitionData(torch.zeros(3, 1), torch.tensor([0, 1, 5]))
  assert cat_feature_cache(0, plain, GLTPartitionBook(book))[0] == 0.0
  # in id order (host memory only): one row per id, the cache row winning
  ratio, feats, id2index, pb = cat_feature_cache(0, own, GLTPartitionBook(book), in_id_order=True)
  assert ratio == pytest.approx(2 / 5)
  assert feats.view(-1).tolist() == [0.0, 1.5, 3.5, 5.0]
  assert id2index.tolist() == [0, 1, -1, 2, -1, 3]
  assert torch.as_tensor(pb)[3].item() == 0 and torch.as_tensor(pb)[2].item() == 1


# -- 7. the shared-memory channel ---------------------------------------------------


def _shmem_bytes() -> int:
  with open('/proc/meminfo') as f:
    for line in f:
      if line.startswith('Shmem:'):
        return int(line.split()[1]) * 1024
  raise RuntimeError('no Shmem line in /proc/meminfo')


def test_shm_channel_backs_memory_lazily():
  before = _shmem_bytes()
  channel = glt.channel.ShmChannel(shm_size='1GB')
  made = _shmem_bytes()
  assert made - before < 64 << 20, f'a 1GB channel took {made - before} bytes at creation'
  msg = {'x': torch.randn(1 << 20)}  # 4 MB
  for _ in range(3):
    channel.send(msg)
    assert torch.equal(channel.recv()['x'], msg['x'])
  assert _shmem_bytes() - before < 128 << 20
  del channel


def test_shm_channel_larger_than_memory_is_a_memory_error():
  available, _ = glt.utils.memory.available_memory()
  with pytest.raises(MemoryError, match='larger than'):
    glt.channel.ShmChannel(shm_size=available + (64 << 30))


def _send_one_and_exit(channel):
  channel.send({'x': torch.ones(2)})


def test_glt_recv_pattern_after_producers_exit():
  channel = glt.channel.ShmChannel(shm_size='1MB')
  proc = multiprocessing.get_context('spawn').Process(target=_send_one_and_exit, args=(channel,))
  proc.start()
  proc.join(60)
  assert proc.exitcode == 0
  assert torch.equal(channel.recv(timeout_ms=10_000)['x'], torch.ones(2))
  # GLT code polls and catches QueueTimeoutError; a closed channel must be caught the same way
  with pytest.raises(glt.channel.QueueTimeoutError):
    channel.recv(timeout_ms=50)
  with pytest.raises(glt.channel.ChannelClosedError):
    channel.recv(timeout_ms=50)


def test_package_imports_cleanly_in_a_fresh_interpreter():
  # `from graphlearn_torch import *` and `glt.utils.*` the way GLT scripts use them
  code = 'from graphlearn_torch import *; import graphlearn_torch as glt; glt.utils.get_free_port()'
  assert os.system(f'{__import__("sys").executable} -c "{code}"') == 0
