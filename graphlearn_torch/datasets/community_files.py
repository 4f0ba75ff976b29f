"""A graph with planted communities written to .npy files chunk by chunk, at
any size: the edge list is never held in memory (memory is of the order of
the node count), so graphs larger than the machine's memory can be made to
test partitioning and loading at scale."""

import logging
import os
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from ..partition.npy import NpyWriter

logger = logging.getLogger(__name__)


@dataclass
class CommunityFiles:
  """The files :func:`write_community_graph` wrote.

  Args:
    rows: ``rows.npy``, each edge's source (int32; int64 past 2**31 nodes).
    cols: ``cols.npy``, each edge's destination.
    feats: ``feats.npy``, ``[num_nodes, feature_dim]`` float16 features.
    labels: ``labels.npy``, each node's community (int64).
    train_idx: ``train_idx.npy``, a tenth of the nodes (int64).
    num_nodes: the node count.
    num_edges: the directed edge count.
  """

  rows: str
  cols: str
  feats: str
  labels: str
  train_idx: str
  num_nodes: int
  num_edges: int


def write_community_graph(
  directory: str,
  num_nodes: int,
  num_edges: int,
  num_classes: int = 16,
  homophily: float = 0.9,
  feature_dim: int = 128,
  seed: int = 0,
  chunk_edges: int = 1 << 24,
  progress: bool = True,
) -> CommunityFiles:
  """Writes a graph with ``num_classes`` planted communities of equal size:
  a share ``homophily`` of the edges join two nodes of one community, the
  rest two nodes at random; both directions of each are stored (so
  ``num_edges`` is even). Features are a noisy community centroid.

  Args:
    directory: where the files go.
    num_nodes: nodes.
    num_edges: directed edges (rounded down to an even count).
    num_classes: communities.
    homophily: the share of edges inside a community.
    feature_dim: feature columns (0: no feature file).
    seed: the random seed.
    chunk_edges: edges generated and written at a time.
    progress: show a progress bar (on a terminal).
  """
  if num_nodes < num_classes or num_classes < 1:
    raise ValueError(f'need at least one node per community: {num_nodes} nodes, {num_classes}')
  os.makedirs(directory, exist_ok=True)
  g = torch.Generator().manual_seed(seed)
  # Communities are ranges of a random order of the nodes.
  order = torch.randperm(num_nodes, generator=g)
  bounds = (torch.arange(num_classes + 1) * num_nodes + num_classes - 1) // num_classes
  community_of_position = torch.repeat_interleave(torch.arange(num_classes), bounds.diff())
  labels = torch.empty(num_nodes, dtype=torch.int64)
  labels[order] = community_of_position
  names = ('rows', 'cols', 'feats', 'labels', 'train_idx')
  paths = [os.path.join(directory, f'{name}.npy') for name in names]
  files = CommunityFiles(*paths, num_nodes, num_edges // 2 * 2)
  id_dtype = torch.int32 if num_nodes < 2**31 else torch.int64
  half = max(1, chunk_edges // 2)
  bar = tqdm(total=files.num_edges, desc='community graph edges', unit='edge', unit_scale=True,
             disable=None if progress else True)  # fmt: skip
  with (
    NpyWriter(files.rows, (files.num_edges,), id_dtype) as rows,
    NpyWriter(files.cols, (files.num_edges,), id_dtype) as cols,
  ):
    for start in range(0, files.num_edges // 2, half):
      n = min(half, files.num_edges // 2 - start)
      src = torch.randint(0, num_nodes, (n,), generator=g)
      community = community_of_position[src]
      size = (bounds[community + 1] - bounds[community]).to(torch.float64)
      inside = bounds[community] + (torch.rand(n, generator=g, dtype=torch.float64) * size).long()
      anywhere = torch.randint(0, num_nodes, (n,), generator=g)
      dst = torch.where(torch.rand(n, generator=g) < homophily, inside, anywhere)
      src, dst = order[src].to(id_dtype), order[dst].to(id_dtype)
      rows.write(torch.cat([src, dst]))
      cols.write(torch.cat([dst, src]))
      bar.update(2 * n)
  bar.close()
  _write_nodes(files, labels, num_classes, feature_dim, g)
  logger.info('community graph: %d nodes, %d edges in %s', num_nodes, files.num_edges, directory)
  return files


def _write_nodes(files: CommunityFiles, labels, num_classes: int, feature_dim: int, g) -> None:
  """The labels, a tenth of the nodes as training seeds, and the features."""
  with NpyWriter(files.labels, labels.shape, torch.int64) as w:
    w.write(labels)
  train = torch.sort(torch.randperm(files.num_nodes, generator=g)[: files.num_nodes // 10]).values
  with NpyWriter(files.train_idx, train.shape, torch.int64) as w:
    w.write(train)
  if feature_dim <= 0:
    return
  centroids = torch.randn(num_classes, feature_dim, generator=g)
  with NpyWriter(files.feats, (files.num_nodes, feature_dim), torch.float16) as w:
    for start in range(0, files.num_nodes, 1 << 18):
      y = labels[start : start + (1 << 18)]
      noise = torch.randn(y.numel(), feature_dim, generator=g)
      w.write((centroids[y] + noise).to(torch.float16))
