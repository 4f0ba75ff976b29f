"""PartitionerBase: splits a graph's nodes, edges and features into partitions
and writes them in the format of ``format.py``.

A partitioner decides which partition owns each node (``_assign_nodes``);
this base class does the rest, streaming: edges go to the partition of their
source (``edge_assign_strategy='by_src'``) or destination node, feature rows to
the partition of their node or edge, written chunk by chunk so memory stays of
the order of the input graph.
"""

import logging
import os
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union

import torch
from tqdm.auto import tqdm

from ..typing import (
  HOMO_EDGE_TYPE,
  HOMO_NODE_TYPE,
  EdgeType,
  NodeIndex,
  NodeLabel,
  NodeType,
  TensorDataType,
)
from .format import (
  META_FILE,
  book_path,
  feature_path,
  graph_path,
  save_meta,
  save_npy,
  save_times,
  split_path,
  type_key,
  write_edge_rows,
  write_feature_rows,
)
from .hotness import EDGE_CHUNK, expected_reads
from .inputs import PartitionInputs
from .summary import PartitionSummary

logger = logging.getLogger(__name__)

DEFAULT_CACHE_NUM_NEIGHBORS = [15, 10, 5]


class PartitionerBase(ABC):
  """Splits a homogeneous or heterogeneous graph into ``num_parts`` partitions.

  Args:
    output_dir: the directory to write (see docs/partition_format.md).
    num_parts: the number of partitions.
    num_nodes: the node count, or a dict of them by node type.
    edge_index: ``[2, E]`` (or ``(rows, cols)``) global node ids, or a dict of
      them by edge type. NumPy memory maps are read without copying.
    node_feat: ``[num_nodes, dim]`` features (or a dict by node type).
    node_feat_dtype: the dtype node features are stored in.
    edge_feat: ``[E, dim]`` features by edge position (or a dict by type).
    edge_feat_dtype: the dtype edge features are stored in.
    edge_weights: ``[E]`` weights (or a dict by edge type).
    edge_assign_strategy: 'by_src' puts an edge in its source's partition
      (for out-edge sampling), 'by_dst' in its destination's (in-edges).
    chunk_size: feature rows (and 16x as many edges) written at a time.
    node_labels: labels (or a dict by node type) written to ``labels.npy``.
    node_split: ``(train_idx, val_idx, test_idx)`` (tensors or dicts by
      node type, None for a missing split), written per partition.
    book: 'tensor' keeps node ids and writes one partition id per node;
      'range' renumbers nodes so partition i owns a contiguous id range (the
      book is then a list of ranges; ``node_map`` gives each new id's
      original id, and labels, splits and edges use the new ids).
    progress: show a progress bar (on a terminal).
    cache_memory_budget: bytes of other partitions' feature rows each
      partition replicates (an int, or a dict by node type); the hottest
      rows first (see ``_hotness``). Remote rows that are read often then
      come from local memory. None: no cache.
    cache_ratio: the same as a share of the node count (used when
      cache_memory_budget is not given).
    cache_num_neighbors: the fanout by which hotness is estimated (default
      [15, 10, 5]).
    node_time: each node's time (or a dict by node type), for temporal
      sampling by node time: written whole to ``node_time.npy``, as labels.
    edge_time: each edge's time by edge position (or a dict by edge type),
      for temporal sampling by edge time: written whole to
      ``edge_time.npy``, by edge id.
  """

  name = 'base'

  def __init__(
    self,
    output_dir: str,
    num_parts: int,
    num_nodes: Union[int, Dict[NodeType, int]],
    edge_index: Union[TensorDataType, Dict[EdgeType, TensorDataType]],
    node_feat: Optional[Union[TensorDataType, Dict[NodeType, TensorDataType]]] = None,
    node_feat_dtype: torch.dtype = torch.float32,
    edge_feat: Optional[Union[TensorDataType, Dict[EdgeType, TensorDataType]]] = None,
    edge_feat_dtype: torch.dtype = torch.float32,
    edge_weights: Optional[Union[TensorDataType, Dict[EdgeType, TensorDataType]]] = None,
    edge_assign_strategy: str = 'by_src',
    chunk_size: int = 10000,
    node_labels: Optional[NodeLabel] = None,
    node_split: Optional[Tuple[NodeIndex, NodeIndex, NodeIndex]] = None,
    book: str = 'tensor',
    progress: bool = True,
    cache_memory_budget: Optional[Union[int, Dict[NodeType, int]]] = None,
    cache_ratio: Optional[Union[float, Dict[NodeType, float]]] = None,
    cache_num_neighbors: Optional[List[int]] = None,
    node_time: Optional[Union[TensorDataType, Dict[NodeType, TensorDataType]]] = None,
    edge_time: Optional[Union[TensorDataType, Dict[EdgeType, TensorDataType]]] = None,
  ):
    if not 1 <= int(num_parts) < 2**15:
      raise ValueError(f'num_parts must be in [1, 32767], got {num_parts}')
    if edge_assign_strategy not in ('by_src', 'by_dst'):
      raise ValueError(
        f"edge_assign_strategy must be 'by_src' or 'by_dst', got {edge_assign_strategy!r}"
      )
    if book not in ('tensor', 'range'):
      raise ValueError(f"book must be 'tensor' or 'range', got {book!r}")
    if int(chunk_size) < 1:
      raise ValueError(f'chunk_size must be positive, got {chunk_size}')
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
      raise NotADirectoryError(f'output_dir {output_dir} is a file, not a directory')
    self.output_dir = output_dir
    self.num_parts = int(num_parts)
    self.edge_assign_strategy = edge_assign_strategy
    self.chunk_size = int(chunk_size)
    self.book = book
    self.progress = progress
    self.node_feat_dtype, self.edge_feat_dtype = node_feat_dtype, edge_feat_dtype
    inputs = PartitionInputs.of(
      num_nodes, edge_index, node_feat, edge_feat, edge_weights, node_labels, node_split,
      node_time, edge_time,
    )  # fmt: skip
    self.data_cls = 'hetero' if inputs.hetero else 'homo'
    self.num_nodes = inputs.num_nodes
    self.edge_index = inputs.edge_index
    self.node_feat, self.edge_feat = inputs.node_feat, inputs.edge_feat
    self.edge_weights = inputs.edge_weights
    self.node_labels = inputs.node_labels
    self.node_time, self.edge_time = inputs.node_time, inputs.edge_time
    self.node_split = inputs.node_split
    self.cache_memory_budget = self._per_type(cache_memory_budget)
    self.cache_ratio = self._per_type(cache_ratio)
    for ntype, ratio in self.cache_ratio.items():
      if ratio is not None and not 0.0 <= float(ratio) <= 1.0:
        raise ValueError(f'cache_ratio of {ntype!r} must be in [0, 1], got {ratio}')
    self.cache_num_neighbors = list(cache_num_neighbors or DEFAULT_CACHE_NUM_NEIGHBORS)

  def _per_type(self, value) -> Dict[NodeType, Optional[float]]:
    if isinstance(value, dict):
      return {t: value.get(t) for t in self.num_nodes}
    return dict.fromkeys(self.num_nodes, value)

  # -- GLT accessors --------------------------------------------------------------

  def _key(self, t, homo_key):
    return homo_key if t is None and self.data_cls == 'homo' else t

  def get_edge_index(self, etype: Optional[EdgeType] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    return self.edge_index[self._key(etype, HOMO_EDGE_TYPE)]

  def get_node_feat(self, ntype: Optional[NodeType] = None) -> Optional[torch.Tensor]:
    return self.node_feat.get(self._key(ntype, HOMO_NODE_TYPE))

  def get_edge_feat(self, etype: Optional[EdgeType] = None) -> Optional[torch.Tensor]:
    return self.edge_feat.get(self._key(etype, HOMO_EDGE_TYPE))

  # -- what subclasses decide -------------------------------------------------------

  @abstractmethod
  def _assign_nodes(self) -> Dict[NodeType, torch.Tensor]:
    """The partition id (int64) of every node, by node type."""

  def _hotness(self, node_pb: Dict[NodeType, torch.Tensor]) -> Dict[NodeType, torch.Tensor]:
    """Per node type, a ``[num_parts, num_nodes]`` score of how often
    sampling from each partition reads each node's row (``expected_reads``)."""
    return expected_reads(
      self.num_parts,
      self.num_nodes,
      self.edge_index,
      node_pb,
      self.node_split.get('train_idx', {}),
      self.cache_num_neighbors,
      by_src=self.edge_assign_strategy == 'by_src',
    )

  def _cache_nodes(
    self, node_pb: Dict[NodeType, torch.Tensor]
  ) -> Dict[NodeType, List[torch.Tensor]]:
    """Per node type and partition, the ids of other partitions' rows to
    replicate there, hottest first (none unless a cache size is given)."""
    sizes = {t: self._cache_size(t, n) for t, n in self.num_nodes.items()}
    if not any(size > 0 for size in sizes.values()):
      return {}
    hotness = self._hotness(node_pb)
    caches = {}
    for ntype, size in sizes.items():
      if size <= 0:
        continue
      per_part = []
      for p in range(self.num_parts):
        hot = hotness[ntype][p].clone()
        hot[node_pb[ntype] == p] = -1.0  # a partition's own rows are local anyway
        k = min(size, int((hot > 0).sum()))
        per_part.append(torch.topk(hot, k).indices if k else torch.empty(0, dtype=torch.int64))
      caches[ntype] = per_part
    return caches

  def _cache_size(self, ntype: NodeType, num_nodes: int) -> int:
    budget, ratio = self.cache_memory_budget[ntype], self.cache_ratio[ntype]
    if budget is not None:
      feat = self.node_feat.get(ntype)
      if feat is None:
        return 0
      row_bytes = max(
        1, feat[0:1].numel() * torch.empty(0, dtype=self.node_feat_dtype).element_size()
      )
      return int(budget) // row_bytes
    if ratio is not None:
      return int(num_nodes * float(ratio))
    return 0

  # -- the partitioning ---------------------------------------------------------------

  def _dir(self, t):
    """The type as the path helpers take it (None for a homogeneous dataset)."""
    return None if self.data_cls == 'homo' else t

  def partition(self, with_feature: bool = True, graph_caching: bool = False) -> PartitionSummary:
    """Partitions the graph and writes ``output_dir``.

    Args:
      with_feature: write node and edge features.
      graph_caching: also write the whole graph, so each partition can
        sample locally (``DistDataset.load(graph_caching=True)``).

    Returns:
      a PartitionSummary (also logged).
    """
    start = time.perf_counter()
    out = self.output_dir
    os.makedirs(out, exist_ok=True)
    if os.path.exists(os.path.join(out, META_FILE)):
      os.remove(os.path.join(out, META_FILE))  # a stale table must not survive
    steps = len(self.edge_index) * (self.num_parts + graph_caching) + len(self.num_nodes)
    if with_feature:
      steps += (len(self.node_feat) + len(self.edge_feat)) * self.num_parts
    bar = tqdm(
      total=steps + 1,
      desc=f'{self.name} partitioning',
      unit='step',
      disable=None if self.progress else True,
    )
    run = _Run(bar, PartitionSummary(self.name, self.num_parts), with_feature, graph_caching)
    logger.info('%s partitioner: assigning nodes to %d partitions', self.name, self.num_parts)
    run.node_pb = self._checked_assignment()
    bar.update(1)
    self._write_node_books(run)
    num_edges = {type_key(etype): self._write_edges(run, etype) for etype in self.edge_index}
    if with_feature:
      self._write_node_features(run)
    self._write_labels_times_and_splits(run)
    self._write_meta(run, num_edges)
    bar.update(1)
    bar.close()
    run.summary.seconds = time.perf_counter() - start
    logger.info('partitioned into %s\n%s', out, run.summary.format())
    return run.summary

  def _checked_assignment(self) -> Dict[NodeType, torch.Tensor]:
    """``_assign_nodes``' partition ids (int64), checked."""
    node_pb = {t: pb.to(torch.int64) for t, pb in self._assign_nodes().items()}
    for ntype, n in self.num_nodes.items():
      pb = node_pb[ntype]
      if pb.numel() != n or (n and (int(pb.min()) < 0 or int(pb.max()) >= self.num_parts)):
        raise RuntimeError(f'{self.name}: bad assignment of node type {ntype!r}')
    return node_pb

  def _write_node_books(self, run: '_Run') -> None:
    """Writes each node type's book: a partition id per node ('tensor'),
    or the node ids renumbered by partition ('range': ``node_map``)."""
    for ntype, pb in run.node_pb.items():
      counts = torch.bincount(pb, minlength=self.num_parts)
      run.summary.nodes[type_key(ntype)] = counts.tolist()
      if self.book == 'range':
        order = run.original_ids[ntype] = torch.sort(pb, stable=True).indices
        run.new_ids[ntype] = torch.empty_like(order)
        run.new_ids[ntype][order] = torch.arange(order.numel())
        ends = torch.cumsum(counts, 0).tolist()
        run.node_ranges[type_key(ntype)] = [[e - int(c), e] for e, c in zip(ends, counts)]
        save_npy(self.output_dir, book_path('node_map', self._dir(ntype)), order)
      else:
        save_npy(self.output_dir, book_path('node_pb', self._dir(ntype)), pb)
      run.bar.update(1)

  def _edge_assignment(self, run: '_Run', etype: EdgeType) -> torch.Tensor:
    """Each edge's partition (int16), chunk by chunk; counts the cut."""
    rows, cols = self.edge_index[etype]
    assign = torch.empty(rows.numel(), dtype=torch.int16)
    cut = 0
    for s in range(0, rows.numel(), EDGE_CHUNK):
      src_part = run.node_pb[etype[0]][rows[s : s + EDGE_CHUNK].to(torch.int64)]
      dst_part = run.node_pb[etype[-1]][cols[s : s + EDGE_CHUNK].to(torch.int64)]
      cut += int((src_part != dst_part).sum())
      assign[s : s + EDGE_CHUNK] = src_part if self.edge_assign_strategy == 'by_src' else dst_part
    run.summary.cut_edges += cut
    return assign

  def _write_edges(self, run: '_Run', etype: EdgeType) -> int:
    """Writes an edge type's book, each partition's edges (and their
    features), and the whole graph's with ``graph_caching``; returns the
    edge count."""
    out = self.output_dir

    def write_edges(partition_idx, eids):
      """Writes the edges ``eids`` (None: all) into a partition's graph
      directory (None: the whole graph's)."""
      write_edge_rows(
        out, graph_path(partition_idx, self._dir(etype)), self.edge_index[etype],
        self.edge_weights.get(etype), eids,
        lambda r, c: (run.renumber(etype[0], r), run.renumber(etype[-1], c)), self.chunk_size * 16,
      )  # fmt: skip

    assign = self._edge_assignment(run, etype)
    save_npy(out, book_path('edge_pb', self._dir(etype)), assign)
    counts = []
    for p in range(self.num_parts):
      eids = torch.nonzero(assign == p).view(-1)
      counts.append(eids.numel())
      write_edges(p, eids)
      if run.with_feature and etype in self.edge_feat:
        path = feature_path(p, 'edge_feat', self._dir(etype))
        feat = self.edge_feat[etype]
        write_feature_rows(out, path, feat, self.edge_feat_dtype, eids, eids, self.chunk_size)
        run.bar.update(1)
      run.bar.update(1)
    run.summary.edges[type_key(etype)] = counts
    if run.graph_caching:
      write_edges(None, None)
      run.bar.update(1)
    return assign.numel()

  def _write_node_features(self, run: '_Run') -> None:
    """Writes each partition's node feature rows, and its cache of other
    partitions' hottest rows where a cache size is given."""
    caches = self._cache_nodes(run.node_pb)
    for ntype, table in self.node_feat.items():
      cache = caches.get(ntype)
      for p in range(self.num_parts):
        owned = torch.nonzero(run.node_pb[ntype] == p).view(-1)
        base = feature_path(p, 'node_feat', self._dir(ntype))
        rows = [(owned, '')] + ([(cache[p], 'cache_')] if cache is not None else [])
        for ids, prefix in rows:
          write_feature_rows(
            self.output_dir, base, table, self.node_feat_dtype, ids, run.renumber(ntype, ids),
            self.chunk_size, prefix,
          )  # fmt: skip
        run.bar.update(1)
      if cache is not None:
        run.summary.cache_nodes[type_key(ntype)] = [c.numel() for c in cache]

  def _write_labels_times_and_splits(self, run: '_Run') -> None:
    out, hetero = self.output_dir, self.data_cls == 'hetero'

    def in_written_ids(table):
      return {t: v[run.original_ids[t]] if t in run.original_ids else v for t, v in table.items()}

    for ntype, labels in in_written_ids(self.node_labels).items():
      save_npy(out, book_path('labels', self._dir(ntype)), labels)
    save_times(out, 'node_time', in_written_ids(self.node_time), hetero)
    save_times(out, 'edge_time', self.edge_time, hetero)  # edge ids are not renumbered
    for name, split in self.node_split.items():
      for ntype, ids in split.items():
        owner = run.node_pb[ntype][ids]
        for p in range(self.num_parts):
          path = split_path(name, p, self._dir(ntype))
          save_npy(out, path, run.renumber(ntype, ids[owner == p]))
        if name == 'train_idx':
          counts = torch.bincount(owner, minlength=self.num_parts)
          run.summary.train_nodes[type_key(ntype)] = counts.tolist()

  def _write_meta(self, run: '_Run', num_edges: Dict[str, int]) -> None:
    hetero = self.data_cls == 'hetero'
    save_meta(
      self.output_dir,
      self.num_parts,
      self.data_cls,
      list(self.num_nodes) if hetero else None,
      list(self.edge_index) if hetero else None,
      edge_assign_strategy=self.edge_assign_strategy,
      partitioner=self.name,
      book=self.book,
      num_nodes={type_key(t): n for t, n in self.num_nodes.items()},
      num_edges=num_edges,
      node_ranges=run.node_ranges or None,
      graph_caching=bool(run.graph_caching),
      with_feature=bool(run.with_feature),
      complete=True,
    )


@dataclass
class _Run:
  """One ``partition()`` call's progress bar, summary and node ids.

  Args:
    bar: the progress bar.
    summary: what was written, so far.
    with_feature: write features.
    graph_caching: also write the whole graph.
  """

  bar: tqdm
  summary: PartitionSummary
  with_feature: bool
  graph_caching: bool
  node_pb: Dict[NodeType, torch.Tensor] = field(default_factory=dict)
  # Node ids as written: renumbered by partition (the range book), or not.
  new_ids: Dict[NodeType, torch.Tensor] = field(default_factory=dict)
  original_ids: Dict[NodeType, torch.Tensor] = field(default_factory=dict)  # new id -> original
  node_ranges: Dict[str, list] = field(default_factory=dict)

  def renumber(self, ntype: NodeType, ids: torch.Tensor) -> torch.Tensor:
    """``ids`` as written."""
    return self.new_ids[ntype][ids] if ntype in self.new_ids else ids
