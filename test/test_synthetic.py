"""The synthetic generators: shapes, seeding, and the planted communities
measured edge by edge (homophily) against the requested share."""

import numpy as np
import torch

import graphlearn_torch as glt


def inside_share(edge_index: torch.Tensor, src_class: torch.Tensor, dst_class: torch.Tensor):
  return float((src_class[edge_index[0]] == dst_class[edge_index[1]]).float().mean())


def test_community_graph_homophily_and_splits():
  data = glt.datasets.community_graph(num_nodes=4000, num_classes=8, homophily=0.6, seed=1)
  # inside edges: the planted 60% plus the 1/8 of the rest that land inside by chance
  assert abs(inside_share(data.edge_index, data.y, data.y) - (0.6 + 0.4 / 8)) < 0.03
  masks = torch.stack([data.train_mask, data.val_mask, data.test_mask])
  assert torch.equal(masks.sum(0), torch.ones(4000, dtype=torch.long)), 'splits partition nodes'


def test_mag_like_graph_shape_and_communities():
  data = glt.datasets.mag_like_graph(num_papers=3000, num_classes=6, homophily=0.7, seed=2)
  assert set(data.node_types) == {'paper', 'author', 'institution', 'field_of_study'}
  assert set(data.edge_types) == set(glt.datasets.MAG_EDGE_TYPES)
  sizes = {t: data[t].num_nodes for t in data.node_types}
  assert sizes == {'paper': 3000, 'author': 1500, 'institution': 60, 'field_of_study': 150}
  for t in data.node_types:
    assert data[t].x.shape == (sizes[t], 32)
  paper = data['paper']
  assert paper.y.max() < 6
  assert int(paper.train_mask.sum()) == int(paper.val_mask.sum()) == 300
  assert not (paper.train_mask & paper.test_mask).any()
  for src, rel, dst in data.edge_types:
    edge_index = data[src, rel, dst].edge_index
    assert edge_index[0].max() < sizes[src] and edge_index[1].max() < sizes[dst]
    if src == dst:
      assert (edge_index[0] != edge_index[1]).all(), 'no self-loops'
    if src == 'paper' and dst == 'paper':  # exact labels on both ends
      assert abs(inside_share(edge_index, paper.y, paper.y) - (0.7 + 0.3 / 6)) < 0.03
  again = glt.datasets.mag_like_graph(num_papers=3000, num_classes=6, homophily=0.7, seed=2)
  assert torch.equal(again['author', 'writes', 'paper'].edge_index, data['writes'].edge_index)
  # an author's 4 papers: both inside its community with p = 0.49, so two of
  # them share a class with p = 0.49 + 2 * 0.7 * 0.3 / 6 + 0.3**2 / 6 = 0.575
  writes = data['writes'].edge_index
  by_author = paper.y[writes[1][torch.argsort(writes[0], stable=True)]].view(1500, 4)
  pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
  same = torch.stack([by_author[:, i] == by_author[:, j] for i, j in pairs]).float().mean()
  assert abs(float(same) - 0.575) < 0.03, float(same)


def test_community_files_are_written_in_chunks_as_a_symmetric_graph(tmp_path):
  files = glt.datasets.write_community_graph(
    str(tmp_path), 2000, 30001, num_classes=4, homophily=0.8, feature_dim=8, chunk_edges=4000,
    progress=False,
  )  # fmt: skip
  rows, cols = (torch.from_numpy(np.load(p)).long() for p in (files.rows, files.cols))
  labels, feats = torch.from_numpy(np.load(files.labels)), torch.from_numpy(np.load(files.feats))
  assert files.num_edges == rows.numel() == cols.numel() == 30000 and rows.dtype == torch.int64
  assert np.load(files.rows, mmap_mode='r').dtype == np.int32
  # Both directions of every edge.
  n = files.num_nodes
  assert torch.equal(torch.sort(rows * n + cols).values, torch.sort(cols * n + rows).values)
  # Equal communities; edges inside them at homophily plus chance.
  assert torch.bincount(labels).tolist() == [500] * 4
  inside = float((labels[rows] == labels[cols]).double().mean())
  assert abs(inside - (0.8 + 0.2 / 4)) < 0.02
  # Features: the community centroid shows through the noise.
  assert feats.shape == (n, 8) and feats.dtype == torch.float16
  means = torch.stack([feats[labels == c].float().mean(0) for c in range(4)])
  assert torch.cdist(means, means).triu(1)[torch.triu_indices(4, 4, 1).unbind()].min() > 0.5
  train = np.load(files.train_idx)
  assert train.size == n // 10 and np.unique(train).size == train.size
