"""Seeded synthetic graphs: planted communities (learnable) and power-law
graphs of a given size (for benchmarks)."""

from typing import Optional

import torch
from torch_geometric.data import Data


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
