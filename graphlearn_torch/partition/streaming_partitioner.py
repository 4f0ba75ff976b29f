"""StreamingPartitioner: a low edge cut for graphs METIS cannot hold, in
memory of the order of the node count.

It passes over the graph's undirected adjacency block by block (spilled to
disk once, see ``adjacency_blocks.py``) in three stages:

1. **cluster**: size-bounded label propagation groups nodes whose edges
   mostly stay together (each cluster holds at most a ``1 /
   (num_parts * cluster_factor)`` share of the nodes);
2. **partition the clusters**: the graph of the clusters (an edge weighs the
   edges between two clusters) is small enough for METIS, which splits it
   with every balance constraint (or, without pymetis, a greedy packing);
3. **refine**: passes of balanced label propagation move single nodes to the
   partition most of their edges lead to, until few move.
"""

import logging
import os
import tempfile
from typing import Dict, Iterator, Optional, Tuple

import torch
from tqdm.auto import tqdm

from ..typing import NodeType
from .adjacency_blocks import BlockedAdjacency, contract
from .hotness import EDGE_CHUNK
from .label_propagation import (
  PassState,
  draw_salt,
  group_moves,
  propagate,
  take_moves,
  weight_to_parts,
)
from .metis_partitioner import has_pymetis, metis_kway
from .partitioner import PartitionerBase

logger = logging.getLogger(__name__)

GREEDY_HEAVY = 1024  # clusters per partition placed one by one by greedy_pack


def greedy_pack(weight: torch.Tensor, num_parts: int, generator: torch.Generator) -> torch.Tensor:
  """Clusters (``weight`` ``[clusters, columns]``, columns scaled to their
  totals) packed into partitions of equal weight: the heaviest one by one
  into the lightest partition, then the rest, in random order, into what
  each partition lacks."""
  share = weight.to(torch.float64) / weight.sum(0).clamp(min=1).to(torch.float64)
  size = share.sum(1)
  order = torch.argsort(size, descending=True)
  heavy, rest = order[: GREEDY_HEAVY * num_parts], order[GREEDY_HEAVY * num_parts :]
  load = torch.zeros(num_parts, share.size(1), dtype=torch.float64)
  part = torch.empty(weight.size(0), dtype=torch.int64)
  for c in heavy.tolist():
    p = int((load + share[c]).max(1).values.argmin())
    part[c] = p
    load[p] += share[c]
  rest = rest[torch.randperm(rest.numel(), generator=generator)]
  lacking = (size.sum() / num_parts - load.sum(1)).clamp(min=0)
  bounds = torch.cumsum(lacking, 0) / lacking.sum().clamp(min=1e-12) * size[rest].sum()
  filled = torch.cumsum(size[rest], 0) - 0.5 * size[rest]
  part[rest] = torch.searchsorted(bounds, filled).clamp(max=num_parts - 1)
  return part


class StreamingPartitioner(PartitionerBase):
  """Partitions to a low edge cut, reading the edges in chunks: memory of
  the order of the node count plus ``max_block_edges`` edges, whatever the
  edge count (edges in memory-mapped .npy files are never read whole). A
  heterogeneous graph is partitioned as one graph over all node types, each
  type's node count balanced.

  Takes the arguments of :class:`PartitionerBase`, and these.

  Args:
    balance_train: also balance the training nodes (``node_split[0]``).
    imbalance: the tolerated imbalance per constraint (1 + imbalance is the
      allowed max/mean; default 0.03).
    cluster_factor: clusters hold at most ``1 / (num_parts *
      cluster_factor)`` of the nodes (default 8).
    cluster_passes: at most this many label propagation passes to cluster
      (default 4); they stop early when under 1% of the nodes move.
    cluster_refine_passes: at most this many passes moving whole clusters
      (default 8); they stop early when under 0.1% of the clusters move.
    refine_passes: at most this many passes moving single nodes (default
      8); they stop early when under 0.1% of the nodes move.
    max_block_edges: the edges held in memory at a time (default 2**23).
    max_coarse_edges: the most edges the clusters' graph may have to be
      split by METIS (default 2**24); past it, the clusters are packed
      greedily by weight and the refinement alone lowers the cut.
    coarse: 'metis' or 'greedy', how the clusters are split (default:
      'metis' when pymetis is installed).
    workdir: where the adjacency blocks are spilled (default: a temporary
      directory under ``output_dir``); they take 8 bytes per edge and
      direction and are removed at the end.
    seed: the random seed.
  """

  name = 'streaming'

  def __init__(
    self,
    *args,
    balance_train: bool = False,
    imbalance: float = 0.03,
    cluster_factor: float = 8.0,
    cluster_passes: int = 4,
    cluster_refine_passes: int = 8,
    refine_passes: int = 8,
    max_block_edges: int = 1 << 23,
    max_coarse_edges: int = 1 << 24,
    coarse: Optional[str] = None,
    workdir: Optional[str] = None,
    seed: int = 0,
    **kwargs,
  ):
    super().__init__(*args, **kwargs)
    if balance_train and not self.node_split.get('train_idx'):
      raise ValueError('balance_train needs the training nodes: pass node_split=(train, val, test)')
    if coarse is None:
      coarse = 'metis' if has_pymetis() else 'greedy'
    if coarse not in ('metis', 'greedy'):
      raise ValueError(f"coarse must be 'metis' or 'greedy', got {coarse!r}")
    if coarse == 'metis' and not has_pymetis():
      raise ImportError("coarse='metis' needs pymetis: pip install pymetis")
    for name, value in (('cluster_factor', cluster_factor), ('max_block_edges', max_block_edges)):
      if value <= 0:
        raise ValueError(f'{name} must be positive, got {value}')
    self.balance_train = balance_train
    self.imbalance = float(imbalance)
    self.cluster_factor = float(cluster_factor)
    self.cluster_passes = int(cluster_passes)
    self.cluster_refine_passes = int(cluster_refine_passes)
    self.refine_passes = int(refine_passes)
    self.max_block_edges = int(max_block_edges)
    self.max_coarse_edges = int(max_coarse_edges)
    self.coarse = coarse
    self.workdir = workdir
    self.seed = int(seed)
    self.passes = []  # (stage, nodes moved, cut ratio after the pass), filled by partition()

  # -- the graph as one node space -------------------------------------------------

  def _offsets(self) -> Tuple[Dict[NodeType, int], int]:
    offsets, total = {}, 0
    for t, n in self.num_nodes.items():
      offsets[t], total = total, total + n
    return offsets, total

  def _edge_chunks(self, offsets: Dict[NodeType, int]) -> Iterator[tuple]:
    """Every edge type's edges, ``EDGE_CHUNK`` at a time, in global ids."""
    for etype, (rows, cols) in self.edge_index.items():
      for s in range(0, rows.numel(), EDGE_CHUNK):
        r = rows[s : s + EDGE_CHUNK].to(torch.int64) + offsets[etype[0]]
        c = cols[s : s + EDGE_CHUNK].to(torch.int64) + offsets[etype[-1]]
        yield r, c

  def _node_weights(self, offsets: Dict[NodeType, int], total: int) -> torch.Tensor:
    """``[nodes, columns]``: one column per node type, and the training nodes."""
    columns = []
    for t, n in self.num_nodes.items():
      col = torch.zeros(total, dtype=torch.int64)
      col[offsets[t] : offsets[t] + n] = 1
      columns.append(col)
    if self.balance_train:
      col = torch.zeros(total, dtype=torch.int64)
      for t, ids in self.node_split['train_idx'].items():
        col[ids.to(torch.int64) + offsets[t]] = 1
      columns.append(col)
    return torch.stack(columns, dim=1)

  # -- the stages ---------------------------------------------------------------------

  def _assign_nodes(self) -> Dict[NodeType, torch.Tensor]:
    offsets, total = self._offsets()
    self.passes = []
    if self.num_parts == 1 or total == 0:
      return {t: torch.zeros(n, dtype=torch.int64) for t, n in self.num_nodes.items()}
    generator = torch.Generator().manual_seed(self.seed)
    base = self.workdir or self.output_dir
    os.makedirs(base, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix='adjacency-', dir=base) as tmp:
      adjacency = BlockedAdjacency.spill(
        total, lambda: self._edge_chunks(offsets), tmp, self.max_block_edges
      )
      label, coarse = self._cluster(adjacency, generator)
      weights = self._node_weights(offsets, total)
      cluster_weight = torch.zeros(int(label.max()) + 1, weights.size(1), dtype=torch.int64)
      cluster_weight.index_add_(0, label, weights)
      cluster_part = self._split_clusters(coarse, cluster_weight, generator)
      del coarse
      part, cut_weight = self._refine_clusters(
        adjacency, label, cluster_part, cluster_weight, generator
      )
      del label, cluster_weight
      self._refine(adjacency, part, weights, cut_weight, generator)
    return {t: part[offsets[t] : offsets[t] + n].clone() for t, n in self.num_nodes.items()}

  def _passes(
    self,
    adjacency,
    state: PassState,
    stage: str,
    passes: int,
    stop_share: float,
    cut_weight: Optional[float] = None,
  ) -> Optional[float]:
    """Up to ``passes`` passes over ``adjacency``; stops once fewer than
    ``stop_share`` of the nodes move. Logs each pass, with the cut when
    refining from a known ``cut_weight``; returns the cut weight after."""
    half = max(adjacency.total_weight / 2, 1)
    for i in range(passes):
      moved = 0
      bar = tqdm(
        total=adjacency.num_blocks,
        desc=f'{self.name}: {stage} pass {i + 1}',
        unit='block',
        leave=False,
        disable=None if self.progress else True,
      )
      for block in adjacency:
        count, gain = propagate(block, state)
        moved += count
        if cut_weight is not None:
          cut_weight -= gain
        bar.update(1)
      bar.close()
      cut = None if cut_weight is None else cut_weight / half
      self.passes.append((stage, moved, cut))
      logger.info(
        '%s: %s pass %d moved %d nodes%s',
        self.name, stage, i + 1, moved, '' if cut is None else f', edge cut {cut:.4f}',
      )  # fmt: skip
      if moved < stop_share * adjacency.num_nodes:
        break
    return cut_weight

  def _cluster(self, adjacency: BlockedAdjacency, generator):
    """Each node's cluster (ids ``[0, clusters)``), and the clusters'
    graph ``(src, dst, weight)``, or None when it has more than
    ``max_coarse_edges`` edges."""
    node_weight = torch.ones(adjacency.num_nodes, 1, dtype=torch.int64)
    cap = max(1, int(adjacency.num_nodes / (self.num_parts * self.cluster_factor)))
    state = PassState(
      torch.arange(adjacency.num_nodes), node_weight, node_weight.clone(), torch.tensor([cap]),
      generator, tie_salt=draw_salt(generator),
    )  # fmt: skip
    self._passes(adjacency, state, 'cluster', self.cluster_passes, 0.01)
    del node_weight, state.load
    unique, label = torch.unique(state.label, return_inverse=True)
    coarse = contract(adjacency, label, unique.numel(), self.max_coarse_edges)
    logger.info(
      '%s: %d clusters, %s weighted edges between them', self.name, unique.numel(),
      f'more than {self.max_coarse_edges}' if coarse is None else coarse[0].numel(),
    )  # fmt: skip
    return label, coarse

  def _split_clusters(self, coarse, cluster_weight: torch.Tensor, generator) -> torch.Tensor:
    """Each cluster's partition: a partitioning of the clusters' graph
    (``coarse``; None: clusters packed greedily by ``cluster_weight``)."""
    num_clusters = cluster_weight.size(0)
    how = self.coarse if coarse is not None and num_clusters > self.num_parts else 'greedy'
    if how == 'metis':
      src, dst, w = coarse
      indptr = torch.zeros(num_clusters + 1, dtype=torch.int64)
      indptr[1:] = torch.cumsum(torch.bincount(src, minlength=num_clusters), 0)
      ufactor = max(1, int(round(self.imbalance * 1000)))
      cluster_part = metis_kway(
        indptr, dst, cluster_weight, self.num_parts, ufactor, self.seed, eweights=w
      )
    else:
      cluster_part = greedy_pack(cluster_weight, self.num_parts, generator)
    logger.info('%s: %d clusters split by %s', self.name, num_clusters, how)
    return cluster_part

  def _capacity(self, weights: torch.Tensor) -> torch.Tensor:
    """The most weight of each column a partition may hold: ``1 +
    imbalance`` of the mean, rounded down, but never under the mean."""
    total = weights.sum(0).to(torch.float64)
    cap = torch.floor(total * (1 + self.imbalance) / self.num_parts)
    return torch.maximum(cap, torch.ceil(total / self.num_parts)).to(torch.int64)

  def _refine_clusters(self, adjacency, label, cluster_part, cluster_weight, generator) -> tuple:
    """Passes that move whole clusters to the partition most of their edges
    lead to (half of the clusters may move in a pass); returns each node's
    partition and the undirected cut weight."""
    num_clusters = cluster_part.numel()
    load = torch.zeros(self.num_parts, cluster_weight.size(1), dtype=torch.int64)
    load.index_add_(0, cluster_part, cluster_weight)
    cap = self._capacity(cluster_weight)
    half, moved = max(adjacency.total_weight / 2, 1), 0
    for i in range(self.cluster_refine_passes + 1):
      by_part = weight_to_parts(
        adjacency, label, cluster_part[label], (num_clusters, self.num_parts)
      )
      inside = float(by_part.gather(1, cluster_part.view(-1, 1)).sum())
      cut_weight = (adjacency.total_weight - inside) / 2
      self.passes.append(('split' if i == 0 else 'cluster refine', moved, cut_weight / half))
      logger.info('%s: %s, edge cut %.4f', self.name, self.passes[-1][0], self.passes[-1][2])
      if i == self.cluster_refine_passes or (i and moved < 0.001 * num_clusters):
        break
      moves = group_moves(by_part, cluster_part, 0.5, generator)
      moved = take_moves(moves, cluster_part, cluster_weight, load, cap)[0].numel()
      if moved == 0:  # the cut stands, and the rule above would stop after recounting it
        break
    return cluster_part[label], cut_weight

  def _refine(self, adjacency, part, weights: torch.Tensor, cut_weight: float, generator) -> None:
    load = torch.zeros(self.num_parts, weights.size(1), dtype=torch.int64)
    load.index_add_(0, part, weights)
    state = PassState(part, weights, load, self._capacity(weights), generator)
    self._passes(adjacency, state, 'refine', self.refine_passes, 0.001, cut_weight)
