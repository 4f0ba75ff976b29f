"""Tables read in place from files, shared with the host's processes by the
file's name (utils/mapped_file.py): no copy where the pages are the file's,
a copy where they are not, and handles that do not name the file refused."""

import dataclasses
import pickle
import traceback
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest
import torch
from test_host_share import run_child

import graphlearn_torch as glt
from graphlearn_torch.partition import RandomPartitioner
from graphlearn_torch.partition.npy import load_npy
from graphlearn_torch.utils.host_share import HostShareError, HostTensorHandle
from graphlearn_torch.utils.mapped_file import MappedFileHandle, MappedFileTensor

pytestmark = pytest.mark.skipif(
  not glt.utils.host_share.host_sharing_available(), reason='needs Linux /proc and memfds'
)


def saved_table(tmp_path, rows=1000, dim=7, name='x.npy') -> tuple:
  table = torch.randn(rows, dim, generator=torch.Generator().manual_seed(rows))
  path = str(tmp_path / name)
  np.save(path, table.numpy())
  return table, path


def test_a_slice_of_a_mapped_file_is_found_and_mapped_again(tmp_path):
  table, path = saved_table(tmp_path)
  mapped = load_npy(path)
  for rows in (mapped, mapped[3:], mapped[999:]):
    found = MappedFileTensor.of(rows)
    assert found is not None and found.tensor is rows
    assert found.handle.path == path and found.handle.shape == tuple(rows.shape)
    again = MappedFileTensor.open(found.handle).tensor
    assert torch.equal(again, rows)
    assert again.data_ptr() != rows.data_ptr(), 'a mapping of its own, of the same pages'


def test_memory_that_is_not_the_files_is_not_found(tmp_path):
  _, path = saved_table(tmp_path)
  written = load_npy(path)
  written[500, 0] = 1.0  # one copy-on-write page: no longer the file's
  shared = glt.utils.host_share.HostSharedTensor.copy_of(torch.arange(10.0))
  strided = load_npy(path)[:, :3]
  for tensor in (torch.randn(100, 3), written, shared.tensor, strided, load_npy(path)[:0]):
    assert MappedFileTensor.of(tensor) is None


def test_handles_that_do_not_name_the_file_are_refused(tmp_path):
  _, path = saved_table(tmp_path)
  _, other = saved_table(tmp_path, rows=2000, name='y.npy')
  handle = MappedFileTensor.of(load_npy(path)).handle
  for bad in (
    dataclasses.replace(handle, boot_id='another host'),
    dataclasses.replace(handle, path=other),  # another inode
    dataclasses.replace(handle, path=str(tmp_path / 'gone.npy')),
    dataclasses.replace(handle, shape=(10**6, 7)),  # past the file's end
  ):
    with pytest.raises(HostShareError):
      MappedFileTensor.open(bad)


def test_a_feature_read_from_a_file_is_shared_as_the_file(tmp_path):
  table, path = saved_table(tmp_path)
  id2index = torch.randperm(1000, generator=torch.Generator().manual_seed(1))
  feature = glt.data.Feature(load_npy(path), id2index)
  before = feature.feature_tensor.data_ptr()
  handle = feature.host_share()
  assert isinstance(handle.table, MappedFileHandle) and handle.table.path == path
  assert feature.feature_tensor.data_ptr() == before, 'nothing copied'
  assert isinstance(handle.id2index, HostTensorHandle), 'the map lives in memory: shared'
  peer = glt.data.Feature.from_host_handle(handle)
  ids = torch.randint(0, 1000, (300,), generator=torch.Generator().manual_seed(2))
  assert torch.equal(peer.cpu_get(ids), table[id2index[ids]])
  assert peer.host_share().table == handle.table, 'handed on as the same file'
  written = glt.data.Feature(load_npy(path))
  written.feature_tensor[0, 0] = 5.0
  assert isinstance(written.host_share().table, HostTensorHandle), 'copied: not the file'


def rows_in_child(dataset, ids, queue):
  try:
    handle = dataset.node_features.host_share()
    queue.put((dataset.node_features.cpu_get(ids).tolist(), handle.table))
  except Exception:
    queue.put(traceback.format_exc())


def test_a_pickled_partition_hands_its_features_over_in_place(tmp_path):
  num_nodes = 500
  g = torch.Generator().manual_seed(0)
  x = torch.randn(num_nodes, 16, generator=g)
  edge_index = torch.randint(0, num_nodes, (2, 4000), generator=g)
  RandomPartitioner(
    str(tmp_path), 2, num_nodes, edge_index, node_feat=x, seed=0, progress=False
  ).partition()
  ds = glt.distributed.DistDataset().load(str(tmp_path), 1, graph_mode='CPU')
  copy = pickle.loads(ForkingPickler.dumps(ds))
  own = glt.partition.partition_book.owned_ids(ds.node_pb, 1)
  assert torch.equal(copy.node_features[own], x[own])
  # one id-to-row map for both: a write through one is seen through the other
  original = ds.node_features.id2index[0].item()
  copy.node_features.id2index[0] = 7
  assert ds.node_features.id2index[0].item() == 7
  ds.node_features.id2index[0] = original
  rows, table_handle = run_child(rows_in_child, ds, own)
  assert torch.equal(torch.tensor(rows), x[own])
  assert isinstance(table_handle, MappedFileHandle), 'the child maps the partition file'
  # the node book's lookup copy (an entry a node) is this process's, in shared
  # memory: a write through one is seen through the other
  lookup = ds.node_pb.host_lookup_copy()
  assert lookup.is_shared() and copy.node_pb.host_lookup_copy().is_shared()
  assert torch.equal(copy.node_pb.partitions(own), torch.ones_like(own, dtype=torch.int8))
  lookup[own[0]] = 0
  assert copy.node_pb.partitions(own[:1]).item() == 0
  lookup[own[0]] = 1
  assert sent_lookups(ds)[1] is None, 'an edge book made a copy for no edge features'
  # the partition books stay the partition's files, here and in the copy
  for book in (ds.edge_pb, copy.edge_pb, ds.edge_feat_pb, copy.edge_feat_pb):
    assert MappedFileTensor.of(book.tensor) is not None, 'an edge book copied into memory'


def sent_lookups(ds) -> tuple:
  r"""The node and edge books' lookup copies a pickled ``ds`` carries."""
  _, ((kind, payload),) = glt.distributed.dist_dataset.reduce_dist_dataset(ds)
  assert kind == 'load'
  return payload[-1]


def test_a_pickled_partition_shares_the_edge_book_its_edge_features_read(tmp_path):
  num_nodes, num_edges = 300, 3000
  g = torch.Generator().manual_seed(1)
  edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=g)
  RandomPartitioner(
    str(tmp_path), 2, num_nodes, edge_index, node_feat=torch.randn(num_nodes, 4, generator=g),
    edge_feat=torch.randn(num_edges, 3, generator=g), seed=0, progress=False,
  ).partition()  # fmt: skip
  ds = glt.distributed.DistDataset().load(str(tmp_path), 0, graph_mode='CPU')
  node_lookup, edge_lookup = sent_lookups(ds)
  assert node_lookup.is_shared() and node_lookup.numel() == num_nodes
  assert edge_lookup.is_shared() and edge_lookup.numel() == num_edges
  copy = pickle.loads(ForkingPickler.dumps(ds))
  eids = torch.arange(num_edges)
  assert copy.edge_pb.host_lookup_copy().is_shared()
  assert torch.equal(copy.edge_pb.partitions(eids).long(), ds.edge_pb.tensor[eids].long())
