"""METIS against random partitioning on real and synthetic graphs, and the
memory-mapped load of a large feature file."""

import json
import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import graphlearn_torch as glt
from graphlearn_torch.partition import MetisPartitioner, RandomPartitioner

log = logging.getLogger(__name__)


def compare_cuts(tmp_path, num_nodes, edge_index, train, num_parts):
  """Partitions with random and METIS (balancing training nodes); returns both summaries."""
  random = RandomPartitioner(
    str(tmp_path / f'random{num_parts}'),
    num_parts,
    num_nodes,
    edge_index,
    node_split=(train, None, None),
    seed=0,
    progress=False,
  ).partition()
  metis = MetisPartitioner(
    str(tmp_path / f'metis{num_parts}'),
    num_parts,
    num_nodes,
    edge_index,
    node_split=(train, None, None),
    balance_train=True,
    progress=False,
  ).partition()
  print(
    f'{num_nodes} nodes, {num_parts} parts: edge cut random {random.cut_ratio:.3f}, '
    f'metis {metis.cut_ratio:.3f}; metis node balance {metis.node_balance():.3f}, '
    f'train balance {metis.train_balance():.3f}'
  )
  return random, metis


def check_metis_wins(random, metis):
  assert metis.cut_ratio <= 0.5 * random.cut_ratio
  assert metis.node_balance() <= 1.05
  assert metis.train_balance() <= 1.10


@pytest.mark.parametrize('num_parts', [2, 4])
def test_metis_halves_random_cut_on_cora(tmp_path, cora_root, num_parts):
  data = glt.datasets.load_planetoid(cora_root, 'cora')
  train = data.train_mask.nonzero().view(-1)
  check_metis_wins(*compare_cuts(tmp_path, data.num_nodes, data.edge_index, train, num_parts))


@pytest.mark.parametrize('num_parts', [2, 4])
def test_metis_halves_random_cut_on_1m_nodes(tmp_path, num_parts):
  data = glt.datasets.community_graph(
    1_000_000, num_classes=16, avg_degree=10, feature_dim=1, homophily=0.9, seed=0
  )
  train = data.train_mask.nonzero().view(-1)
  check_metis_wins(*compare_cuts(tmp_path, data.num_nodes, data.edge_index, train, num_parts))


MEASURE = textwrap.dedent(
  """
  import json, sys
  import torch
  from graphlearn_torch.distributed import DistDataset

  def rss():
    with open('/proc/self/status') as f:
      return next(int(l.split()[1]) * 1024 for l in f if l.startswith('VmRSS'))

  root = sys.argv[1]
  before = rss()
  ds = DistDataset().load(root, 0, graph_mode='CPU')
  loaded = rss()
  owned = torch.nonzero(ds.node_pb.tensor == 0).view(-1)[:8]
  rows = ds.node_features[owned]
  touched = rss()
  print(json.dumps({'before': before, 'loaded': loaded, 'touched': touched,
                    'shape': list(ds.node_features.shape), 'zeros': bool((rows == 0).all())}))
  """
)


def test_load_memory_maps_a_4gb_feature_file(tmp_path):
  num_nodes = 2000
  edges = torch.randint(0, num_nodes, (2, 10000))
  RandomPartitioner(
    str(tmp_path), 2, num_nodes, edges, node_feat=torch.zeros(num_nodes, 1), seed=0, progress=False
  ).partition()
  # Swap partition 0's feature file for a 4 GB one (sparse: no disk used).
  rel = 'part0/node_feat/feats.npy'
  path = tmp_path / rel
  rows = int(np.load(path, mmap_mode='r').shape[0])
  dim = -(-(4 << 30) // (rows * 4))
  with open(path, 'wb') as f:
    np.lib.format.write_array_header_1_0(
      f, {'descr': '<f4', 'fortran_order': False, 'shape': (rows, dim)}
    )
    f.truncate(f.tell() + rows * dim * 4)
  meta = json.loads((tmp_path / 'META.json').read_text())
  meta['files'][rel].update(shape=[rows, dim], dtype='<f4')
  (tmp_path / 'META.json').write_text(json.dumps(meta))
  assert os.path.getsize(path) >= 4 << 30

  out = subprocess.run(
    [sys.executable, '-c', MEASURE, str(tmp_path)],
    capture_output=True,
    text=True,
    timeout=300,
    check=True,
  )
  figures = json.loads(out.stdout.strip().splitlines()[-1])
  grown = (figures['loaded'] - figures['before']) / 2**20
  print(f'feature file {os.path.getsize(path) / 2**30:.2f} GiB: RSS +{grown:.1f} MiB on load')
  assert figures['shape'] == [rows, dim]
  assert grown < 500
  assert figures['zeros']
  # Touching 8 rows of 4 MiB reads about 32 MiB, not the file.
  assert (figures['touched'] - figures['loaded']) / 2**20 < 500
