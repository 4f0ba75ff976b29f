"""Bad partitions and bad partitioner input give errors that name the file or
argument and the fix; GLT's pickle format loads only when the caller opts in."""

import json
import os
import pickle

import pytest
import torch

from graphlearn_torch.distributed import DistDataset
from graphlearn_torch.partition import (
  PartitionFileError,
  RandomPartitioner,
  load_partition,
  read_meta,
)

NUM_NODES = 100


@pytest.fixture
def part_root(tmp_path):
  g = torch.Generator().manual_seed(0)
  edges = torch.randint(0, NUM_NODES, (2, 500), generator=g)
  RandomPartitioner(
    str(tmp_path),
    2,
    NUM_NODES,
    edges,
    node_feat=torch.randn(NUM_NODES, 4, generator=g),
    seed=0,
    progress=False,
  ).partition()
  return tmp_path


def edit_meta(root, **changes):
  meta = json.loads((root / 'META.json').read_text())
  for key, value in changes.items():
    if value is None:
      meta.pop(key)
    else:
      meta[key] = value
  (root / 'META.json').write_text(json.dumps(meta))


def test_missing_file(part_root):
  os.remove(part_root / 'part1' / 'graph' / 'cols.npy')
  load_partition(str(part_root), 0)  # the other partition is intact
  with pytest.raises(FileNotFoundError, match=r'part1/graph/cols\.npy.*re-run the partitioner'):
    load_partition(str(part_root), 1)


def test_missing_meta(tmp_path):
  with pytest.raises(FileNotFoundError, match='META.json not found.*partition the graph first'):
    load_partition(str(tmp_path), 0)


def test_truncated_file(part_root):
  path = part_root / 'part0' / 'node_feat' / 'feats.npy'
  with open(path, 'r+b') as f:
    f.truncate(os.path.getsize(path) - 8)
  with pytest.raises(PartitionFileError, match=r'feats\.npy is truncated.*re-run'):
    DistDataset().load(str(part_root), 0, graph_mode='CPU')


def test_garbage_file(part_root):
  (part_root / 'part0' / 'graph' / 'rows.npy').write_bytes(b'not a numpy file at all')
  with pytest.raises(PartitionFileError, match=r'rows\.npy is not a valid \.npy file'):
    load_partition(str(part_root), 0)


def test_corrupt_bytes_found_by_verify(part_root):
  path = part_root / 'part0' / 'node_feat' / 'feats.npy'
  data = bytearray(path.read_bytes())
  data[-3] ^= 0xFF
  path.write_bytes(bytes(data))
  load_partition(str(part_root), 0)  # same size: only the hash can tell
  with pytest.raises(PartitionFileError, match=r'feats\.npy is corrupt: its sha256'):
    load_partition(str(part_root), 0, verify=True)


def test_file_not_matching_meta(part_root):
  meta = json.loads((part_root / 'META.json').read_text())
  meta['files']['part0/graph/eids.npy']['shape'] = [1]
  (part_root / 'META.json').write_text(json.dumps(meta))
  with pytest.raises(PartitionFileError, match=r'eids\.npy holds .* but META\.json records'):
    load_partition(str(part_root), 0)


def test_partition_idx_out_of_range(part_root):
  with pytest.raises(ValueError, match=r'partition_idx 2 is out of range.*2 partitions'):
    DistDataset().load(str(part_root), 2)


def test_newer_format_version(part_root):
  edit_meta(part_root, version=99)
  with pytest.raises(ValueError, match='version 99 comes from a newer graphlearn_torch.*upgrade'):
    load_partition(str(part_root), 0)


def test_unfinished_partitioning(part_root):
  edit_meta(part_root, num_parts=None)
  with pytest.raises(ValueError, match='did not finish'):
    read_meta(str(part_root))


def write_glt_partition(root, num_parts, edges, feats, node_pb):
  """Writes a partition the way GLT 0.2.x does (pickles, torch.save)."""
  os.makedirs(root, exist_ok=True)
  with open(os.path.join(root, 'META'), 'wb') as f:
    pickle.dump(
      {'num_parts': num_parts, 'data_cls': 'homo', 'node_types': None, 'edge_types': None}, f
    )
  edge_pb = node_pb[edges[0]]
  torch.save(node_pb, os.path.join(root, 'node_pb.pt'))
  torch.save(edge_pb, os.path.join(root, 'edge_pb.pt'))
  for p in range(num_parts):
    eids = torch.nonzero(edge_pb == p).view(-1)
    gdir = os.path.join(root, f'part{p}', 'graph')
    os.makedirs(gdir)
    for name, t in (('rows', edges[0, eids]), ('cols', edges[1, eids]), ('eids', eids)):
      torch.save(t, os.path.join(gdir, f'{name}.pt'))
    ids = torch.nonzero(node_pb == p).view(-1)
    fdir = os.path.join(root, f'part{p}', 'node_feat')
    os.makedirs(fdir)
    half = ids.numel() // 2
    for name, t in (('feats', feats[ids]), ('ids', ids)):
      with open(os.path.join(fdir, f'{name}.pkl'), 'ab') as f:  # two appended chunks
        pickle.dump(t[:half], f)
        pickle.dump(t[half:], f)


def test_glt_pickle_partition_needs_opt_in(tmp_path):
  g = torch.Generator().manual_seed(1)
  edges = torch.randint(0, NUM_NODES, (2, 400), generator=g)
  feats = torch.randn(NUM_NODES, 3, generator=g)
  node_pb = torch.randint(0, 2, (NUM_NODES,), generator=g)
  write_glt_partition(str(tmp_path), 2, edges, feats, node_pb)
  with pytest.raises(ValueError, match='GLT 0.2.x partition.*allow_pickle=True'):
    load_partition(str(tmp_path), 0)
  with pytest.raises(ValueError, match='allow_pickle=True'):
    DistDataset().load(str(tmp_path), 0)
  for p in range(2):
    num_parts, idx, graph, node_feat, edge_feat, pb, _ = load_partition(
      str(tmp_path), p, allow_pickle=True
    )
    assert (num_parts, idx, edge_feat) == (2, p, None)
    assert torch.equal(pb.tensor, node_pb)
    assert torch.equal(graph.edge_index, edges[:, graph.eids])
    assert torch.equal(node_feat.ids, torch.nonzero(node_pb == p).view(-1))
    assert torch.equal(node_feat.feats, feats[node_feat.ids])
    ds = DistDataset().load(str(tmp_path), p, graph_mode='CPU', allow_pickle=True)
    assert torch.equal(ds.node_features[node_feat.ids], feats[node_feat.ids])


@pytest.mark.parametrize(
  'kwargs, message',
  [
    (
      {'edge_index': torch.tensor([[0, 5], [1, NUM_NODES]])},
      r'destination ids must be in \[0, 100\)',
    ),
    ({'node_feat': torch.zeros(NUM_NODES - 1, 2)}, 'node_feat of .* has 99 rows for 100 nodes'),
    ({'edge_weights': torch.ones(3)}, 'edge_weights of .* has 3 rows for 2 edges'),
    ({'edge_assign_strategy': 'by_both'}, "edge_assign_strategy must be 'by_src' or 'by_dst'"),
    ({'book': 'hash'}, "book must be 'tensor' or 'range'"),
    ({'num_parts': 0}, r'num_parts must be in \[1, 32767\]'),
    ({'edge_index': torch.zeros(3, 2, dtype=torch.long)}, r'shape \[2, num_edges\]'),
    ({'node_split': (torch.tensor([NUM_NODES]), None, None)}, r'train_idx .* outside \[0, 100\)'),
  ],
)
def test_bad_partitioner_input(tmp_path, kwargs, message):
  args = {'num_parts': 2, 'edge_index': torch.tensor([[0, 5], [1, 2]])}
  args.update(kwargs)
  with pytest.raises(ValueError, match=message):
    RandomPartitioner(str(tmp_path), num_nodes=NUM_NODES, progress=False, **args)


def test_hetero_needs_dicts(tmp_path):
  with pytest.raises(TypeError, match='dicts by type'):
    RandomPartitioner(str(tmp_path), 2, {'a': 3}, torch.zeros(2, 1, dtype=torch.long))


def test_output_dir_that_is_a_file(tmp_path):
  path = tmp_path / 'a_file'
  path.write_text('')
  with pytest.raises(NotADirectoryError, match='a_file is a file, not a directory'):
    RandomPartitioner(str(path), 2, NUM_NODES, torch.tensor([[0], [1]]), progress=False)


def test_metis_refuses_more_parts_than_nodes(tmp_path):
  # METIS itself answers OK with one or two parts holding every node.
  pytest.importorskip('pymetis')
  from graphlearn_torch.partition import MetisPartitioner
  from graphlearn_torch.partition.metis_partitioner import metis_kway

  edges = torch.tensor([[0, 1, 2], [1, 2, 3]])
  with pytest.raises(ValueError, match='cannot cut 4 nodes into 5 parts: ask for at most 4'):
    MetisPartitioner(str(tmp_path), 5, 4, edges, progress=False)
  indptr, indices = torch.tensor([0, 1, 3, 5, 6]), torch.tensor([1, 0, 2, 1, 3, 2])
  with pytest.raises(ValueError, match='METIS cannot cut 4 nodes into 5 parts'):
    metis_kway(indptr, indices, None, 5, 30, 0)
  assert metis_kway(indptr, indices, None, 2, 30, 0).bincount().tolist() == [2, 2]
  MetisPartitioner(str(tmp_path), 4, 4, edges, progress=False)  # as many parts as nodes: allowed


def test_dist_dataset_partition_idx_is_checked():
  for parts, idx in ((2, 5), (2, -1), (0, 0)):
    with pytest.raises(ValueError, match=r'partition_idx must be in \[0, num_partitions\)'):
      DistDataset(num_partitions=parts, partition_idx=idx)
  assert DistDataset(num_partitions=2, partition_idx=1).partition_idx == 1
