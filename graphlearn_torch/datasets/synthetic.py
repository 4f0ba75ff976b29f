"""Seeded synthetic graphs: planted communities (learnable; homogeneous, and
heterogeneous shaped like ogbn-mag) and power-law graphs of a given size
(for benchmarks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import torch

if TYPE_CHECKING:  # PyG is imported on first use: sampling processes never need it
  from torch_geometric.data import Data, HeteroData


def community_graph(
  num_nodes: int = 10_000,
  num_classes: int = 8,
  avg_degree: int = 10,
  feature_dim: int = 32,
  homophily: float = 0.6,
  feature_noise: float = 5.0,
  seed: int = 0,
) -> Data:
  """A graph with planted communities: each node's class is its community,
  a share ``homophily`` of its edges stay inside it, and its features are a
  noisy class centroid. Node classification on it is learnable but not
  trivial. Edges are undirected (both directions stored).

  Args:
    num_nodes: nodes.
    num_classes: communities (classes).
    avg_degree: directed edges per node, on average.
    feature_dim: feature columns.
    homophily: the share of edges inside a community.
    feature_noise: the standard deviation of the feature noise.
    seed: the random seed.
  """
  from torch_geometric.data import Data

  g = torch.Generator().manual_seed(seed)
  y = torch.randint(0, num_classes, (num_nodes,), generator=g)
  by_class = [torch.nonzero(y == c).view(-1) for c in range(num_classes)]
  num_edges = num_nodes * avg_degree // 2
  src = torch.randint(0, num_nodes, (num_edges,), generator=g)
  inside = torch.rand(num_edges, generator=g) < homophily
  dst = torch.randint(0, num_nodes, (num_edges,), generator=g)
  for c, members in enumerate(by_class):
    pick = inside & (y[src] == c)
    if members.numel():
      dst[pick] = members[torch.randint(0, members.numel(), (int(pick.sum()),), generator=g)]
  keep = src != dst
  src, dst = src[keep], dst[keep]
  edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
  centroids = torch.randn(num_classes, feature_dim, generator=g)
  x = centroids[y] + feature_noise * torch.randn(num_nodes, feature_dim, generator=g)
  perm = torch.randperm(num_nodes, generator=g)
  n_train, n_val = num_nodes // 10, num_nodes // 10
  masks = [torch.zeros(num_nodes, dtype=torch.bool) for _ in range(3)]
  masks[0][perm[:n_train]] = True
  masks[1][perm[n_train : n_train + n_val]] = True
  masks[2][perm[n_train + n_val :]] = True
  return Data(
    x=x, y=y, edge_index=edge_index, train_mask=masks[0], val_mask=masks[1], test_mask=masks[2]
  )


def power_law_edges(
  num_nodes: int,
  num_edges: int,
  exponent: float = 1.0,
  seed: int = 0,
  chunk_size: int = 1 << 24,
  out: Optional[torch.Tensor] = None,
) -> torch.Tensor:
  """Directed edges whose endpoints follow a Zipf-like law (node i is picked
  with weight (i + 1) ** -exponent, then ids are shuffled), like the skewed
  degrees of real graphs. Generated in chunks; memory is the output alone.

  Args:
    num_nodes: nodes.
    num_edges: directed edges.
    exponent: the Zipf exponent of both endpoints' distribution.
    seed: the random seed.
    chunk_size: edges generated at a time.
    out: an int64 ``[2, num_edges]`` tensor to fill.
  """
  g = torch.Generator().manual_seed(seed)
  relabel = torch.randperm(num_nodes, generator=g)
  edges = out if out is not None else torch.empty(2, num_edges, dtype=torch.int64)
  # Inverse-CDF sampling of the continuous Zipf law on [1, num_nodes + 1).
  a = 1.0 - exponent
  lo, hi = 1.0, float(num_nodes + 1)
  for start in range(0, num_edges, chunk_size):
    n = min(chunk_size, num_edges - start)
    for row in range(2):
      u = torch.rand(n, generator=g, dtype=torch.float64)
      if abs(a) < 1e-9:
        x = lo * (hi / lo) ** u
      else:
        x = (lo**a + u * (hi**a - lo**a)) ** (1.0 / a)
      ids = (x.floor().long() - 1).clamp_(0, num_nodes - 1)
      edges[row, start : start + n] = relabel[ids]
  return edges


MAG_EDGE_TYPES = (
  ('author', 'writes', 'paper'),
  ('author', 'affiliated_with', 'institution'),
  ('paper', 'cites', 'paper'),
  ('paper', 'has_topic', 'field_of_study'),
)


def _planted_edges(
  src_class: torch.Tensor,
  dst_class: torch.Tensor,
  per_src: int,
  homophily: float,
  g: torch.Generator,
) -> torch.Tensor:
  r"""``per_src`` edges out of every source node; each ends in a node of the
  source's class with probability ``homophily``, else anywhere."""
  src = torch.arange(src_class.numel()).repeat_interleave(per_src)
  dst = torch.randint(0, dst_class.numel(), (src.numel(),), generator=g)
  inside = torch.rand(src.numel(), generator=g) < homophily
  for c in range(int(dst_class.max()) + 1):
    members = torch.nonzero(dst_class == c).view(-1)
    pick = inside & (src_class[src] == c)
    if members.numel():
      dst[pick] = members[torch.randint(0, members.numel(), (int(pick.sum()),), generator=g)]
  return torch.stack([src, dst])


def mag_like_graph(
  num_papers: int = 10_000,
  num_classes: int = 8,
  feature_dim: int = 32,
  homophily: float = 0.7,
  feature_noise: float = 4.0,
  seed: int = 0,
) -> HeteroData:
  r"""A heterogeneous graph shaped like ogbn-mag, with planted communities:
  papers, authors, institutions and fields of study each belong to one of
  ``num_classes`` communities, and a share ``homophily`` of every edge type's
  edges stays inside a community. Paper labels are their communities; every
  node type has noisy community-centroid features, so classifying papers
  gains from their neighbours. Edge types (ogbn-mag's): author-writes-paper,
  author-affiliated_with-institution, paper-cites-paper,
  paper-has_topic-field_of_study; papers have train/val/test masks (10/10/80).

  Args:
    num_papers: papers; there are half as many authors, ``num_papers // 50``
      institutions and ``num_papers // 20`` fields of study.
    num_classes: communities (paper classes).
    feature_dim: feature columns of every node type.
    homophily: the share of edges inside a community.
    feature_noise: the standard deviation of the feature noise.
    seed: the random seed.
  """
  from torch_geometric.data import HeteroData

  g = torch.Generator().manual_seed(seed)
  sizes = {
    'paper': num_papers,
    'author': max(num_papers // 2, 1),
    'institution': max(num_papers // 50, num_classes),
    'field_of_study': max(num_papers // 20, num_classes),
  }
  classes = {t: torch.randint(0, num_classes, (n,), generator=g) for t, n in sizes.items()}
  centroids = torch.randn(num_classes, feature_dim, generator=g)
  data = HeteroData()
  for node_type, y in classes.items():
    noise = torch.randn(y.numel(), feature_dim, generator=g)
    data[node_type].x = centroids[y] + feature_noise * noise
  per_src = {'writes': 4, 'affiliated_with': 1, 'cites': 5, 'has_topic': 3}
  for src, rel, dst in MAG_EDGE_TYPES:
    edge_index = _planted_edges(classes[src], classes[dst], per_src[rel], homophily, g)
    if src == dst:
      edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    data[src, rel, dst].edge_index = edge_index
  paper = data['paper']
  paper.y = classes['paper']
  perm = torch.randperm(num_papers, generator=g)
  n_train = n_val = num_papers // 10
  for name, ids in (
    ('train_mask', perm[:n_train]),
    ('val_mask', perm[n_train : n_train + n_val]),
    ('test_mask', perm[n_train + n_val :]),
  ):
    mask = torch.zeros(num_papers, dtype=torch.bool)
    mask[ids] = True
    paper[name] = mask
  return data
