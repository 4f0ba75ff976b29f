"""A graph's undirected adjacency cut into blocks of consecutive nodes, each
holding a bounded number of edges, on disk or in memory: what the streaming
partitioner passes over, one block at a time, so its memory stays of the
order of the node count whatever the edge count.

Block ``i`` holds every edge, in both directions and without self-loops,
whose source lies in ``[starts[i], starts[i + 1])``: everything a pass needs
to decide about those nodes.
"""

import logging
import os
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, List, Optional, Tuple

import numpy as np
import torch

logger = logging.getLogger(__name__)

EdgeChunks = Callable[[], Iterable[Tuple[torch.Tensor, torch.Tensor]]]


@dataclass
class AdjacencyBlock:
  """The edges out of the nodes ``[start, stop)``.

  Args:
    start: the block's first node.
    stop: one past its last node.
    src: each edge's source, less ``start`` (int64).
    dst: each edge's other end (int64).
    weight: each edge's weight (int64), None for all ones.
  """

  start: int
  stop: int
  src: torch.Tensor
  dst: torch.Tensor
  weight: Optional[torch.Tensor] = None

  def weights(self) -> torch.Tensor:
    """The edge weights, ones when there are none."""
    if self.weight is None:
      return torch.ones(self.src.numel(), dtype=torch.int64)
    return self.weight


def block_starts(degree: torch.Tensor, max_block_edges: int) -> List[int]:
  """Node ranges holding about ``max_block_edges`` edges each (a node of
  higher degree gets a block of its own): the first node of each block, then
  the node count."""
  num_nodes = degree.numel()
  ends = torch.cumsum(degree, 0)
  total = int(ends[-1]) if num_nodes else 0
  marks = torch.arange(max_block_edges, max(total, max_block_edges), max_block_edges)
  starts = torch.searchsorted(ends, marks, right=True) + 1
  starts = torch.unique(torch.cat([torch.zeros(1, dtype=torch.int64), starts.clamp(max=num_nodes)]))
  return [int(s) for s in starts if s < num_nodes] + [num_nodes]


def _both_directions(rows: torch.Tensor, cols: torch.Tensor):
  rows, cols = rows.to(torch.int64), cols.to(torch.int64)
  keep = rows != cols
  rows, cols = rows[keep], cols[keep]
  return torch.cat([rows, cols]), torch.cat([cols, rows])


class BlockedAdjacency:
  """The undirected adjacency of ``num_nodes`` nodes in blocks of node ranges.

  Build one with :meth:`spill` (edges streamed from chunks to files in a
  directory) or :meth:`in_memory` (a weighted graph already in memory).

  Args:
    num_nodes: the node count.
    starts: the first node of each block, then ``num_nodes``.
    paths: each block's file stem on disk (spilled blocks), or None.
    total_weight: the summed weight of every edge (both directions).
    paths: each block's file stem on disk (spilled blocks), or None.
    tensors: each block's ``(src, dst, weight)`` (in-memory blocks), or None.
  """

  def __init__(
    self,
    num_nodes: int,
    starts: List[int],
    total_weight: int,
    paths: Optional[List[str]] = None,
    tensors: Optional[List[tuple]] = None,
  ):
    self.num_nodes = num_nodes
    self.total_weight = total_weight
    self.starts = starts
    self.paths = paths
    self.tensors = tensors

  @property
  def num_blocks(self) -> int:
    return len(self.starts) - 1

  @classmethod
  def spill(
    cls,
    num_nodes: int,
    edge_chunks: EdgeChunks,
    directory: str,
    max_block_edges: int,
  ) -> 'BlockedAdjacency':
    """Reads the edges twice, chunk by chunk, and writes each block's edges
    to ``directory``: int32 sources (less the block's start) and int32 (or
    int64, past 2**31 nodes) destinations.

    Args:
      num_nodes: the node count.
      edge_chunks: a function returning an iterable of ``(rows, cols)``
        chunks of directed edges (called twice).
      directory: where the block files go (the caller removes it).
      max_block_edges: the edges a block holds, about (more for a node of
        higher degree).
    """
    degree = torch.zeros(num_nodes, dtype=torch.int64)
    for rows, cols in edge_chunks():
      src, _ = _both_directions(rows, cols)
      degree += torch.bincount(src, minlength=num_nodes)
    starts = block_starts(degree, max_block_edges)
    total_weight = int(degree.sum())
    del degree
    os.makedirs(directory, exist_ok=True)
    paths = [os.path.join(directory, f'block{i}') for i in range(len(starts) - 1)]
    dst_dtype = np.int32 if num_nodes < 2**31 else np.int64
    bounds = torch.tensor(starts, dtype=torch.int64)
    files = [(open(p + '.src', 'wb'), open(p + '.dst', 'wb')) for p in paths]
    try:
      for rows, cols in edge_chunks():
        src, dst = _both_directions(rows, cols)
        block = torch.searchsorted(bounds, src, right=True) - 1
        order = torch.argsort(block)
        src, dst, block = src[order], dst[order], block[order]
        present, counts = torch.unique_consecutive(block, return_counts=True)
        offset = 0
        for b, c in zip(present.tolist(), counts.tolist()):
          piece = slice(offset, offset + c)
          (src[piece] - starts[b]).numpy().astype(np.int32).tofile(files[b][0])
          dst[piece].numpy().astype(dst_dtype).tofile(files[b][1])
          offset += c
    finally:
      for f_src, f_dst in files:
        f_src.close()
        f_dst.close()
    logger.info('adjacency: %d nodes in %d blocks under %s', num_nodes, len(paths), directory)
    return cls(num_nodes, starts, total_weight, paths=paths)

  @classmethod
  def in_memory(
    cls,
    num_nodes: int,
    src: torch.Tensor,
    dst: torch.Tensor,
    weight: Optional[torch.Tensor],
    max_block_edges: int,
  ) -> 'BlockedAdjacency':
    """Blocks of a graph in memory whose edges are already symmetric and
    sorted by source (as :func:`contract` returns them)."""
    degree = torch.bincount(src, minlength=num_nodes)
    starts = block_starts(degree, max_block_edges)
    ends = torch.cumsum(degree, 0)
    tensors = []
    for a, b in zip(starts[:-1], starts[1:]):
      lo, hi = int(ends[a - 1]) if a else 0, int(ends[b - 1])
      w = None if weight is None else weight[lo:hi]
      tensors.append((src[lo:hi] - a, dst[lo:hi], w))
    total_weight = src.numel() if weight is None else int(weight.sum())
    return cls(num_nodes, starts, total_weight, tensors=tensors)

  def block(self, i: int) -> AdjacencyBlock:
    """Block ``i``, read from disk when spilled."""
    start, stop = self.starts[i], self.starts[i + 1]
    if self.tensors is not None:
      src, dst, weight = self.tensors[i]
      return AdjacencyBlock(start, stop, src, dst, weight)
    src = torch.from_numpy(np.fromfile(self.paths[i] + '.src', dtype=np.int32)).to(torch.int64)
    dst_dtype = np.int32 if self.num_nodes < 2**31 else np.int64
    dst = torch.from_numpy(np.fromfile(self.paths[i] + '.dst', dtype=dst_dtype)).to(torch.int64)
    return AdjacencyBlock(start, stop, src, dst)

  def __iter__(self) -> Iterator[AdjacencyBlock]:
    for i in range(self.num_blocks):
      yield self.block(i)


def contract(
  adjacency: BlockedAdjacency, label: torch.Tensor, num_labels: int, max_edges: int
) -> Optional[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
  """The graph of the labels: an edge between two labels weighs the edges
  between their nodes. Returns its symmetric edges ``(src, dst, weight)``,
  sorted by source, without self-loops; or None once it has more than
  ``max_edges`` edges (memory stays of the order of ``max_edges``).

  Args:
    adjacency: the graph.
    label: each node's label, in ``[0, num_labels)``.
    num_labels: the label count.
    max_edges: the most edges the labels' graph may have.
  """
  keys, weights, pending = [], [], 0

  def merged():
    k, inverse = torch.unique(torch.cat(keys), return_inverse=True)
    w = torch.zeros(k.numel(), dtype=torch.int64).index_add_(0, inverse, torch.cat(weights))
    return k, w

  for block in adjacency:
    a, b = label[block.src + block.start], label[block.dst]
    keep = a != b
    k, inverse = torch.unique(a[keep] * num_labels + b[keep], return_inverse=True)
    w = torch.zeros(k.numel(), dtype=torch.int64).index_add_(0, inverse, block.weights()[keep])
    keys.append(k)
    weights.append(w)
    pending += k.numel()
    if pending > max_edges:
      k, w = merged()
      if k.numel() > max_edges:
        return None
      keys, weights, pending = [k], [w], k.numel()
  if not keys:
    empty = torch.empty(0, dtype=torch.int64)
    return empty, empty, empty
  k, w = merged()
  if k.numel() > max_edges:
    return None
  return k // num_labels, k % num_labels, w
