"""examples/partition_dataset.py end to end: synthetic, Cora, and an OGB
dataset in OGB's real on-disk layout."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import graphlearn_torch as glt
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


MAG_SIZES = {'author': 120, 'field_of_study': 30, 'institution': 10, 'paper': 200}
MAG_RELATIONS = [
  ('author', 'affiliated_with', 'institution'),
  ('author', 'writes', 'paper'),
  ('paper', 'cites', 'paper'),
  ('paper', 'has_topic', 'field_of_study'),
]


def write_fake_ogbn_mag(root: Path, num_classes=4, edges_per_relation=600):
  """A tiny ogbn-mag in OGB's unpacked layout (``mag.zip`` as ogb renames
  it): per-type node counts, features and labels of papers, one folder per
  relation, and the time split of papers. Papers' features are their class
  centroid plus noise, and edges stay mostly within a class, so labels are
  learnable."""
  pd = pytest.importorskip('pandas')
  base = root / 'ogbn_mag'
  raw = base / 'raw'
  rng = np.random.default_rng(0)

  def write(path, array, header=False):
    path.parent.mkdir(parents=True, exist_ok=True)
    frame = array if isinstance(array, pd.DataFrame) else pd.DataFrame(array)
    frame.to_csv(path, header=header, index=False, compression='gzip')

  def per_type(values):
    return pd.DataFrame({t: [values[t]] for t in MAG_SIZES})

  write(raw / 'num-node-dict.csv.gz', per_type(MAG_SIZES), header=True)
  write(raw / 'nodetype-has-label.csv.gz', per_type({t: t == 'paper' for t in MAG_SIZES}), True)
  write(raw / 'nodetype-has-feat.csv.gz', per_type({t: t == 'paper' for t in MAG_SIZES}), True)
  write(raw / 'triplet-type-list.csv.gz', np.array(MAG_RELATIONS))
  klass = {t: rng.integers(0, num_classes, n) for t, n in MAG_SIZES.items()}
  for rel in MAG_RELATIONS:
    src_t, _, dst_t = rel
    src = rng.integers(0, MAG_SIZES[src_t], edges_per_relation)
    # most edges go to a node of the source's class
    same = [np.flatnonzero(klass[dst_t] == c) for c in range(num_classes)]
    dst = np.array([rng.choice(same[klass[src_t][s]]) for s in src])
    noise = rng.random(edges_per_relation) < 0.2
    dst[noise] = rng.integers(0, MAG_SIZES[dst_t], int(noise.sum()))
    folder = raw / 'relations' / '___'.join(rel)
    write(folder / 'edge.csv.gz', np.stack([src, dst], 1))
    write(folder / 'num-edge-list.csv.gz', np.array([[edges_per_relation]]))
    write(
      folder / 'edge_reltype.csv.gz', np.full((edges_per_relation, 1), MAG_RELATIONS.index(rel))
    )
  centroids = rng.standard_normal((num_classes, 128))
  papers = MAG_SIZES['paper']
  feat = centroids[klass['paper']] + rng.standard_normal((papers, 128))
  write(raw / 'node-feat' / 'paper' / 'node-feat.csv.gz', feat.round(4))
  write(raw / 'node-feat' / 'paper' / 'node_year.csv.gz', rng.integers(2010, 2020, (papers, 1)))
  write(raw / 'node-label' / 'paper' / 'node-label.csv.gz', klass['paper'][:, None])
  split = base / 'split' / 'time'
  write(split / 'nodetype-has-split.csv.gz', per_type({t: t == 'paper' for t in MAG_SIZES}), True)
  perm = rng.permutation(papers)
  for name, ids in (('train', perm[:120]), ('valid', perm[120:160]), ('test', perm[160:])):
    write(split / 'paper' / f'{name}.csv.gz', ids[:, None])
  (base / 'RELEASE_v2.txt').touch()
  return klass


def test_ogbn_mag_layout_reads_as_hetero_data(tmp_path):
  pytest.importorskip('ogb')
  klass = write_fake_ogbn_mag(tmp_path)
  data = glt.datasets.load_ogb_node_dataset(tmp_path, 'ogbn-mag')
  assert {t: data[t].num_nodes for t in data.node_types} == MAG_SIZES
  assert sorted(data.edge_types) == MAG_RELATIONS
  for rel in MAG_RELATIONS:
    assert data[rel].edge_index.shape == (2, 600)
  assert data['paper'].x.shape == (200, 128) and 'x' not in data['author']
  assert torch.equal(data['paper'].y, torch.from_numpy(klass['paper']))
  assert data['paper'].year.shape == (200,)
  splits = torch.cat([data['paper'][k] for k in ('train_idx', 'val_idx', 'test_idx')])
  assert torch.equal(splits.sort().values, torch.arange(200))
  # the same tensors as ogb's own dataset class reads (it writes processed/)
  from ogb.nodeproppred import NodePropPredDataset

  (tmp_path / 'ogbn_mag' / 'processed').mkdir()
  ref = NodePropPredDataset('ogbn-mag', root=str(tmp_path))
  graph, labels = ref[0]

  def tensor(array):  # ogb's arrays may be read-only, which torch warns of
    return torch.from_numpy(np.require(array, requirements='W'))

  for rel, edge_index in graph['edge_index_dict'].items():
    assert torch.equal(data[rel].edge_index, tensor(edge_index))
  assert torch.equal(data['paper'].x, tensor(graph['node_feat_dict']['paper']))
  assert torch.equal(data['paper'].train_idx, tensor(ref.get_idx_split()['train']['paper']))


@pytest.mark.parametrize('partitioner', ['metis', 'random'])
def test_partition_ogbn_mag_layout(tmp_path, partitioner):
  pytest.importorskip('ogb')
  if partitioner == 'metis':
    pytest.importorskip('pymetis')
  write_fake_ogbn_mag(tmp_path / 'ogb')
  args = partition_dataset.parse_args(
    ['--dataset', 'ogbn-mag', '--dataset_root_dir', str(tmp_path / 'ogb'),
     '--output_dir', str(tmp_path / 'out'), '--partitioner', partitioner]
  )  # fmt: skip
  summary = partition_dataset.run(args)
  assert summary.num_parts == 2
  data = partition_dataset.load(args)
  # every node of every type owned by one partition; every edge of every
  # relation in one partition, between the nodes it joins in the data
  owners = {t: [] for t in MAG_SIZES}
  edge_ids = {rel: [] for rel in MAG_RELATIONS}
  for p in range(2):
    ds = DistDataset(edge_dir='in').load(str(tmp_path / 'out'), p, graph_mode='CPU')
    for ntype in MAG_SIZES:
      book = ds.node_pb[ntype][torch.arange(MAG_SIZES[ntype])]
      owners[ntype].append((book == p).nonzero().view(-1))
    owned_papers = owners['paper'][-1]
    paper_x = ds.node_features['paper']
    assert torch.equal(paper_x[owned_papers], data['paper'].x[owned_papers])
    for rel in MAG_RELATIONS:
      src, dst, ids, _ = ds.graph[rel].topo.to_coo()
      assert torch.equal(data[rel].edge_index[0, ids], src)
      assert torch.equal(data[rel].edge_index[1, ids], dst)
      edge_ids[rel].append(ids)
  for ntype, n in MAG_SIZES.items():
    assert torch.equal(torch.cat(owners[ntype]).sort().values, torch.arange(n))
  for rel in MAG_RELATIONS:
    assert torch.equal(torch.cat(edge_ids[rel]).sort().values, torch.arange(600))


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
