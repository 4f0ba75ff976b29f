"""Partition files are not trusted: values out of range, type names that
would leave the partition directory and malformed META.json values give an
error that names the file, on every load (no ``verify=True`` needed)."""

import json

import numpy as np
import pytest
import torch

from graphlearn_torch.distributed import DistDataset
from graphlearn_torch.partition import PartitionFileError, RandomPartitioner, load_partition

NUM_NODES = 100


@pytest.fixture
def part_root(tmp_path):
  g = torch.Generator().manual_seed(0)
  RandomPartitioner(
    str(tmp_path),
    2,
    NUM_NODES,
    torch.randint(0, NUM_NODES, (2, 500), generator=g),
    node_feat=torch.randn(NUM_NODES, 4, generator=g),
    node_labels=torch.randint(0, 3, (NUM_NODES,), generator=g),
    node_split=(torch.arange(0, 60), torch.arange(60, 80), torch.arange(80, 100)),
    seed=0,
    progress=False,
  ).partition()
  return tmp_path


def poke(path, index, value):
  """Rewrites one entry of a .npy file, keeping its shape and dtype (so only
  the unchecked sha256 differs from META.json)."""
  arr = np.load(path)
  arr[index] = value
  np.save(path, arr)


@pytest.mark.parametrize(
  'relpath, value',
  [
    ('node_pb.npy', 9),  # a partition that does not exist
    ('node_pb.npy', -1),
    ('part0/graph/rows.npy', 2**40),  # would allocate terabytes downstream
    ('part0/graph/cols.npy', -3),
    ('part0/graph/eids.npy', 10**12),
    ('edge_pb.npy', 2),
    ('part0/node_feat/ids.npy', 5000),
  ],
)
def test_out_of_range_values_name_the_file(part_root, relpath, value):
  poke(part_root / relpath, 0, value)
  with pytest.raises(PartitionFileError, match=rf'{relpath}.*holds {value}, outside'):
    load_partition(str(part_root), 0)


@pytest.mark.parametrize('value', [-1, 10**9])
def test_out_of_range_split_ids(part_root, value):
  poke(part_root / 'train_idx' / 'part0.npy', 0, value)
  with pytest.raises(PartitionFileError, match=rf'train_idx/part0\.npy holds {value}'):
    DistDataset().load(str(part_root), 0, graph_mode='CPU')


def test_labels_shorter_than_the_nodes(part_root):
  np.save(part_root / 'labels.npy', np.zeros(10, dtype=np.int64))
  meta = json.loads((part_root / 'META.json').read_text())
  meta['files']['labels.npy']['shape'] = [10]
  (part_root / 'META.json').write_text(json.dumps(meta))
  with pytest.raises(PartitionFileError, match='10 labels for 100 nodes'):
    DistDataset().load(str(part_root), 0, graph_mode='CPU')


def edit_meta(root, **changes):
  meta = json.loads((root / 'META.json').read_text())
  meta.update(changes)
  (root / 'META.json').write_text(json.dumps(meta))


@pytest.mark.parametrize('name', ['/etc', '..', '../outside', 'a/../../b', 'x\\y', ''])
def test_type_names_cannot_leave_the_partition(part_root, name):
  edit_meta(part_root, data_cls='hetero', node_types=[name], edge_types=[[name, 'to', name]])
  with pytest.raises(ValueError, match='type name .* is not allowed'):
    load_partition(str(part_root), 0)


def test_paths_resolving_outside_are_refused(part_root, tmp_path_factory):
  # a type's directory that is a symlink out of the partition
  outside = tmp_path_factory.mktemp('outside')
  for name in ('rows', 'cols', 'eids'):
    (outside / f'{name}.npy').write_bytes(
      (part_root / 'part0' / 'graph' / f'{name}.npy').read_bytes()
    )
  edit_meta(part_root, data_cls='hetero', node_types=['user'], edge_types=[['user', 'to', 'user']])
  (part_root / 'part0' / 'graph' / 'user__to__user').symlink_to(outside, target_is_directory=True)
  with pytest.raises(PartitionFileError, match='outside the partition'):
    load_partition(str(part_root), 0)


@pytest.mark.parametrize(
  'changes, message',
  [
    (dict(version=-5), 'not a version number'),
    (dict(version='1'), 'not a version number'),
    (dict(data_cls='bogus'), "data_cls must be 'homo' or 'hetero'"),
    (dict(num_parts=0), 'num_parts must be a positive integer'),
    (dict(num_parts='2'), 'num_parts must be a positive integer'),
    (dict(num_nodes={'_N': -4}), 'num_nodes must map types'),
    (dict(files=[1, 2]), 'files must be an object'),
    (dict(data_cls='hetero', node_types='user'), 'needs a list of node_types'),
  ],
)
def test_malformed_meta_values(part_root, changes, message):
  edit_meta(part_root, **changes)
  with pytest.raises(ValueError, match=message):
    load_partition(str(part_root), 0)


def test_meta_that_is_not_an_object(part_root):
  (part_root / 'META.json').write_text('[1, 2, 3]')
  with pytest.raises(ValueError, match='must hold a JSON object'):
    load_partition(str(part_root), 0)
