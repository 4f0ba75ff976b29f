"""examples/partition_dataset.py end to end: synthetic, Cora, and an OGB
dataset in OGB's real on-disk layout."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from graphlearn_torch.distributed import DistDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'examples'))
import partition_dataset  # noqa: E402


def check_partitions(out_dir, num_parts, data):
  """Every seed in exactly one partition, which owns it; features match."""
  seen = {name: [] for name in ('train_idx', 'val_idx', 'test_idx')}
  for p in range(num_parts):
    ds = DistDataset(edge_dir='in').load(out_dir, p, graph_mode='CPU')
    original = ds.node_map()
    for name in seen:
      ids = getattr(ds, name)
      assert (ds.node_pb[ids] == p).all()
      seen[name].append(ids if original is None else original[ids])
    owned = torch.nonzero(ds.node_pb[torch.arange(data.num_nodes)] == p).view(-1)[:50]
    want = owned if original is None else original[owned]
    assert torch.allclose(ds.node_features[owned], data.x[want])
    assert torch.equal(ds.node_labels[owned], data.y[want])
  for name, parts in seen.items():
    expected = torch.sort(getattr(data, name)).values
    assert torch.equal(torch.sort(torch.cat(parts)).values, expected)


@pytest.mark.parametrize('partitioner', ['random', 'frequency', 'metis'])
def test_partition_synthetic(tmp_path, partitioner):
  args = partition_dataset.parse_args(
    [
      '--partitioner',
      partitioner,
      '--num_nodes',
      '3000',
      '--output_dir',
      str(tmp_path),
      '--book',
      'range' if partitioner == 'metis' else 'tensor',
      '--num_partitions',
      '3',
    ]
  )
  summary = partition_dataset.run(args)
  assert summary.num_parts == 3
  check_partitions(str(tmp_path), 3, partition_dataset.load(args))


def test_partition_cora(tmp_path, cora_root):
  args = partition_dataset.parse_args(
    ['--dataset', 'cora', '--dataset_root_dir', str(cora_root), '--output_dir', str(tmp_path)]
  )
  summary = partition_dataset.run(args)
  assert summary.cut_ratio < 0.1 and summary.train_balance() <= 1.1
  check_partitions(str(tmp_path), 2, partition_dataset.load(args))


def write_fake_ogbn_arxiv(root: Path, num_nodes=80, num_edges=300):
  """A tiny ogbn-arxiv in OGB's unpacked layout (raw CSVs, time split)."""
  pd = pytest.importorskip('pandas')
  base = root / 'ogbn_arxiv'
  (base / 'raw').mkdir(parents=True)
  (base / 'split' / 'time').mkdir(parents=True)
  rng = np.random.default_rng(0)

  def write(path, array):
    pd.DataFrame(array).to_csv(path, header=False, index=False, compression='gzip')

  write(base / 'raw' / 'edge.csv.gz', rng.integers(0, num_nodes, (num_edges, 2)))
  write(base / 'raw' / 'node-feat.csv.gz', rng.standard_normal((num_nodes, 128)).round(4))
  write(base / 'raw' / 'node-label.csv.gz', rng.integers(0, 40, (num_nodes, 1)))
  write(base / 'raw' / 'num-node-list.csv.gz', np.array([[num_nodes]]))
  write(base / 'raw' / 'num-edge-list.csv.gz', np.array([[num_edges]]))
  write(base / 'raw' / 'node_year.csv.gz', rng.integers(1990, 2020, (num_nodes, 1)))
  perm = rng.permutation(num_nodes)
  for name, ids in (('train', perm[:50]), ('valid', perm[50:65]), ('test', perm[65:])):
    write(base / 'split' / 'time' / f'{name}.csv.gz', ids[:, None])
  (base / 'RELEASE_v1.txt').touch()


def test_partition_ogb_layout(tmp_path):
  pytest.importorskip('ogb')
  write_fake_ogbn_arxiv(tmp_path / 'ogb')
  args = partition_dataset.parse_args(
    [
      '--dataset',
      'ogbn-arxiv',
      '--dataset_root_dir',
      str(tmp_path / 'ogb'),
      '--output_dir',
      str(tmp_path / 'out'),
      '--partitioner',
      'random',
    ]
  )
  data = partition_dataset.load(args)
  assert data.num_nodes == 80 and data.x.shape == (80, 128)
  # ogbn-arxiv is stored directed and OGB adds no inverse edges for it.
  assert data.edge_index.shape == (2, 300)
  assert data.train_idx.numel() == 50 and data.test_idx.numel() == 15
  partition_dataset.run(args)
  check_partitions(str(tmp_path / 'out'), 2, data)


def test_help(capsys):
  with pytest.raises(SystemExit):
    partition_dataset.parse_args(['--help'])
  assert '--num_partitions' in capsys.readouterr().out
