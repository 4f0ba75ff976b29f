"""What a partitioning produced (``PartitionSummary``), and the edge-list
input every partitioner takes."""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch

from .npy import as_tensor


def split_edge_index(edge_index) -> Tuple[torch.Tensor, torch.Tensor]:
  """``(rows, cols)`` of a ``[2, E]`` tensor/array or a pair of 1-D ones."""
  if isinstance(edge_index, (tuple, list)):
    if len(edge_index) != 2:
      raise ValueError(f'edge_index must be a pair (rows, cols), got {len(edge_index)} members')
    rows, cols = (as_tensor(x) for x in edge_index)
  else:
    ei = as_tensor(edge_index)
    if ei.dim() != 2 or ei.size(0) != 2:
      raise ValueError(f'edge_index must have shape [2, num_edges], got {tuple(ei.shape)}')
    rows, cols = ei[0], ei[1]
  if rows.dim() != 1 or rows.shape != cols.shape:
    raise ValueError(
      f'edge_index rows and cols must be 1-D of one length, got {tuple(rows.shape)} '
      f'and {tuple(cols.shape)}'
    )
  if rows.is_floating_point() or cols.is_floating_point():
    raise ValueError('edge_index must hold integer node ids')
  return rows, cols


def balance(counts: List[int]) -> float:
  """max / mean of per-partition counts (1.0 is perfect balance)."""
  total = sum(counts)
  return max(counts) * len(counts) / total if total else 1.0


@dataclass
class PartitionSummary:
  """What a partitioning produced.

  Args:
    partitioner: the partitioner's name.
    num_parts: the number of partitions.
    nodes: per node type, the nodes each partition owns.
    edges: per edge type, the edges each partition holds.
    cut_edges: the edges whose endpoints lie in different partitions.
    train_nodes: per node type, the training seeds each partition owns.
    cache_nodes: per node type, the cached rows each partition holds.
    seconds: the wall time.
  """

  partitioner: str
  num_parts: int
  nodes: Dict[str, List[int]] = field(default_factory=dict)
  edges: Dict[str, List[int]] = field(default_factory=dict)
  cut_edges: int = 0
  train_nodes: Dict[str, List[int]] = field(default_factory=dict)
  cache_nodes: Dict[str, List[int]] = field(default_factory=dict)
  seconds: float = 0.0

  @property
  def num_edges(self) -> int:
    return sum(sum(c) for c in self.edges.values())

  @property
  def cut_ratio(self) -> float:
    """The share of edges cut by the partitioning."""
    return self.cut_edges / self.num_edges if self.num_edges else 0.0

  def node_balance(self, ntype: Optional[str] = None) -> float:
    return balance(self.nodes[ntype or next(iter(self.nodes))])

  def train_balance(self, ntype: Optional[str] = None) -> float:
    return balance(self.train_nodes[ntype or next(iter(self.train_nodes))])

  def format(self) -> str:
    """A table: one row per partition, then the cut and balance figures."""

    def label(what, key):
      return what if key in ('_N', '_N___E___N') else f'{what}[{key}]'

    cols = [label('nodes', k) for k in self.nodes] + [label('edges', k) for k in self.edges]
    cols += [label('train', k) for k in self.train_nodes]
    cols += [label('cache', k) for k in self.cache_nodes]
    groups = [self.nodes, self.edges, self.train_nodes, self.cache_nodes]
    lines = [f'{"part":<9}' + ''.join(f' {c:>15}' for c in cols)]
    for p in range(self.num_parts):
      lines.append(f'{p:<9}' + ''.join(f' {g[k][p]:>15,}' for g in groups for k in g))
    lines.append(
      f'{"max/mean":<9}' + ''.join(f' {balance(g[k]):>15.3f}' for g in groups for k in g)
    )
    lines.append(
      f'{self.partitioner}: {self.num_parts} parts, edge cut {self.cut_edges:,} of '
      f'{self.num_edges:,} ({100 * self.cut_ratio:.2f}%), {self.seconds:.1f} s'
    )
    return '\n'.join(lines)
