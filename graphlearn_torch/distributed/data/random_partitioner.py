"""DistRandomPartitioner: random partitioning by several processes at once,
each holding a piece of a graph too large for one machine.

Each process (one per partition) holds some edges and some feature rows,
with their global ids. The processes assign nodes to partitions at random,
send every edge and feature row to the partition that owns it over
``torch.distributed.rpc``, and each writes its own partition in the format
``DistDataset.load`` reads (docs/partition_format.md).
"""

import logging
import os
import threading
from typing import Dict, List, Optional, Tuple, Union

import torch

from ...partition.format import (
  save_edge_pb,
  save_feature_partition,
  save_graph_partition,
  save_meta,
  save_node_pb,
  type_key,
)
from ...partition.partition_book import GLTPartitionBook
from ...typing import (
  HOMO_EDGE_TYPE,
  HOMO_NODE_TYPE,
  EdgeType,
  FeaturePartitionData,
  GraphPartitionData,
  NodeType,
  TensorDataType,
)
from ...utils.common import ensure_dir
from ...utils.tensor import convert_to_tensor
from ..runtime.context import get_context, init_worker_group
from ..runtime.rpc import (
  DEFAULT_RPC_TIMEOUT_S,
  RpcCalleeBase,
  all_gather,
  barrier,
  get_rpc_current_group_worker_names,
  init_rpc,
  rpc_is_initialized,
  rpc_register,
  rpc_request_async,
)

logger = logging.getLogger(__name__)

Rows = Tuple[torch.Tensor, ...]


class RpcUpdatePartitionValueCallee(RpcCalleeBase):
  r"""Takes the rows that another partitioner sends to this partition.

  Args:
    dist_partition_mgr: the DistPartitionManager that keeps them.
  """

  def __init__(self, dist_partition_mgr: 'DistPartitionManager'):
    super().__init__()
    self.dist_partition_mgr = dist_partition_mgr

  def call(self, *args, **kwargs):
    self.dist_partition_mgr.receive(*args, **kwargs)


class RpcUpdatePartitionBookCallee(RpcCalleeBase):
  r"""Takes partition-book entries that another partitioner decided.

  Args:
    dist_partition_mgr: the DistPartitionManager whose book they update.
  """

  def __init__(self, dist_partition_mgr: 'DistPartitionManager'):
    super().__init__()
    self.dist_partition_mgr = dist_partition_mgr

  def call(self, *args, **kwargs):
    self.dist_partition_mgr.update_book(*args, **kwargs)


class DistPartitionManager:
  r"""The state one round of distributed partitioning builds in this
  process: the rows sent to this partition and, optionally, a partition book
  that every partitioner fills in.

  Args:
    total_val_size: the size of the partition book (the number of ids).
    generate_pb: build a partition book in this round.
  """

  def __init__(self, total_val_size: int = 1, generate_pb: bool = True):
    if not rpc_is_initialized():
      raise RuntimeError('DistPartitionManager needs RPC: call init_rpc first')
    self.num_parts = get_context().world_size
    self.cur_pidx = get_context().rank
    self._lock = threading.Lock()
    self._worker_names = get_rpc_current_group_worker_names()
    self.reset(total_val_size, generate_pb)
    self._value_callee_id = rpc_register(RpcUpdatePartitionValueCallee(self))
    self._book_callee_id = rpc_register(RpcUpdatePartitionBookCallee(self))

  def reset(self, total_val_size: int, generate_pb: bool = True) -> None:
    r"""Starts a round: no rows received, a book of ``total_val_size`` ids."""
    with self._lock:
      self.cur_part_val_list: List[Rows] = []
      self.partition_book = torch.full((total_val_size,), -1) if generate_pb else None

  def receive(self, rows: Rows) -> None:
    r"""Keeps rows sent to this partition."""
    with self._lock:
      self.cur_part_val_list.append(rows)

  def update_book(self, ids: torch.Tensor, partition_idx: int) -> None:
    r"""Records that ``ids`` belong to partition ``partition_idx``."""
    with self._lock:
      self.partition_book[ids] = partition_idx

  def process(self, res_list: List[Tuple[Rows, torch.Tensor]]) -> None:
    r"""Sends each partition its rows, and (with a book) tells every
    partitioner which ids went where.

    Args:
      res_list: per partition, ``(rows, their ids)``.
    """
    if len(res_list) != self.num_parts:
      raise ValueError(f'{len(res_list)} results for {self.num_parts} partitions')
    futures = []
    for pidx, (rows, ids) in enumerate(res_list):
      if pidx == self.cur_pidx:
        self.receive(rows)
      elif rows[0].numel() > 0:
        futures.append(
          rpc_request_async(self._worker_names[pidx], self._value_callee_id, args=(rows,))
        )
      if self.partition_book is None or ids.numel() == 0:
        continue
      for target in range(self.num_parts):
        if target == self.cur_pidx:
          self.update_book(ids, pidx)
        else:
          futures.append(
            rpc_request_async(self._worker_names[target], self._book_callee_id, args=(ids, pidx))
          )
    torch.futures.wait_all(futures)

  def received(self, num_fields: int) -> Rows:
    r"""The rows sent to this partition, each field concatenated."""
    with self._lock:
      pieces = self.cur_part_val_list
      if not pieces:
        return tuple(torch.empty(0, dtype=torch.int64) for _ in range(num_fields))
      return tuple(torch.cat([p[i] for p in pieces]) for i in range(num_fields))


class DistRandomPartitioner:
  r"""Partitions a graph at random with one process per partition, each
  holding a piece of the graph, and writes each process's partition.

  Every process calls ``partition()``; the process of rank ``r`` writes
  partition ``r`` (and the partition books) to its ``output_dir``, which may
  be one shared directory or a local one per machine.

  Args:
    output_dir: where this process writes its partition.
    num_nodes: the number of nodes of the whole graph (a dict by node type
      when heterogeneous).
    edge_index: this process's edges, ``[2, n]`` of global node ids (a dict
      by edge type when heterogeneous).
    edge_ids: the global ids of those edges (every id in ``[0, E)`` held by
      exactly one process).
    node_feat: this process's node feature rows (a dict by node type).
    node_feat_ids: the global node ids of those rows.
    edge_feat: this process's edge feature rows (a dict by edge type).
    edge_feat_ids: the global edge ids of those rows.
    num_parts: the number of partitions (= processes); default: the
      distributed context's world size.
    current_partition_idx: this process's partition; default: its rank.
    node_feat_dtype: the stored dtype of node features.
    edge_feat_dtype: the stored dtype of edge features.
    edge_assign_strategy: 'by_src' (an edge goes with its source) or
      'by_dst'.
    chunk_size: rows sent per message.
    master_addr: the RPC rendezvous address (default: ``$MASTER_ADDR``).
    master_port: its port (default: ``$MASTER_PORT``).
    num_rpc_threads: RPC threads.
    rpc_timeout: seconds an RPC and the rendezvous may take.
  """

  def __init__(
    self,
    output_dir: str,
    num_nodes: Union[int, Dict[NodeType, int]],
    edge_index: Union[TensorDataType, Dict[EdgeType, TensorDataType]],
    edge_ids: Union[TensorDataType, Dict[EdgeType, TensorDataType]],
    node_feat: Optional[Union[TensorDataType, Dict[NodeType, TensorDataType]]] = None,
    node_feat_ids: Optional[Union[TensorDataType, Dict[NodeType, TensorDataType]]] = None,
    edge_feat: Optional[Union[TensorDataType, Dict[EdgeType, TensorDataType]]] = None,
    edge_feat_ids: Optional[Union[TensorDataType, Dict[EdgeType, TensorDataType]]] = None,
    num_parts: Optional[int] = None,
    current_partition_idx: Optional[int] = None,
    node_feat_dtype: torch.dtype = torch.float32,
    edge_feat_dtype: torch.dtype = torch.float32,
    edge_assign_strategy: str = 'by_src',
    chunk_size: int = 10000,
    master_addr: Optional[str] = None,
    master_port: Optional[Union[str, int]] = None,
    num_rpc_threads: int = 16,
    rpc_timeout: float = DEFAULT_RPC_TIMEOUT_S,
  ):
    ctx = get_context()
    if ctx is None:
      if num_parts is None or current_partition_idx is None:
        raise ValueError('without a distributed context, give num_parts and current_partition_idx')
      ctx = init_worker_group(num_parts, current_partition_idx, 'distributed_random_partitioner')
    for given, have, what in (
      (num_parts, ctx.world_size, 'num_parts'),
      (current_partition_idx, ctx.rank, 'current_partition_idx'),
    ):
      if given is not None and given != have:
        raise ValueError(f'{what}={given} differs from the distributed context ({have})')
    self.num_parts, self.current_partition_idx = ctx.world_size, ctx.rank
    if not rpc_is_initialized():
      master_addr = master_addr or os.environ.get('MASTER_ADDR')
      master_port = master_port or os.environ.get('MASTER_PORT')
      if master_addr is None or master_port is None:
        raise ValueError('give master_addr and master_port (or set MASTER_ADDR and MASTER_PORT)')
      init_rpc(master_addr, int(master_port), num_rpc_threads, rpc_timeout)

    self.output_dir = output_dir
    self.hetero = isinstance(num_nodes, dict)
    wrap = (lambda x: x) if self.hetero else (lambda x: {None: x} if x is not None else None)
    self.num_nodes: Dict = wrap(num_nodes)
    self.edge_index = _as_dict(wrap(edge_index), torch.int64, 'edge_index')
    self.edge_ids = _as_dict(wrap(edge_ids), torch.int64, 'edge_ids')
    self.node_feat = _as_dict(wrap(node_feat), node_feat_dtype, 'node_feat')
    self.node_feat_ids = _as_dict(wrap(node_feat_ids), torch.int64, 'node_feat_ids')
    self.edge_feat = _as_dict(wrap(edge_feat), edge_feat_dtype, 'edge_feat')
    self.edge_feat_ids = _as_dict(wrap(edge_feat_ids), torch.int64, 'edge_feat_ids')
    self._check_inputs()
    if edge_assign_strategy.lower() not in ('by_src', 'by_dst'):
      raise ValueError(
        f"edge_assign_strategy must be 'by_src' or 'by_dst', got {edge_assign_strategy!r}"
      )
    self.edge_assign_strategy = edge_assign_strategy.lower()
    if chunk_size <= 0:
      raise ValueError(f'chunk_size must be positive, got {chunk_size}')
    self.chunk_size = chunk_size
    self.node_types = sorted(self.num_nodes) if self.hetero else None
    self.edge_types = sorted(self.edge_index) if self.hetero else None
    # Collective steps run type by type, in the same order in every process.
    self._ntypes = self.node_types or [None]
    self._etypes = self.edge_types or [None]
    self.num_edges = {e: sum(all_gather(self.edge_index[e].size(1))) for e in self._etypes}
    self._mgr = DistPartitionManager()

  def _check_inputs(self) -> None:
    for etype, ei in self.edge_index.items():
      if ei.dim() != 2 or ei.size(0) != 2:
        raise ValueError(f'edge_index{_of(etype)} must have shape [2, n], got {tuple(ei.shape)}')
      eids = self.edge_ids.get(etype)
      if eids is None or eids.numel() != ei.size(1):
        got = None if eids is None else eids.numel()
        raise ValueError(f'edge_ids{_of(etype)} needs one id per edge ({ei.size(1)}), got {got}')
    for feats, ids, what in (
      (self.node_feat, self.node_feat_ids, 'node'),
      (self.edge_feat, self.edge_feat_ids, 'edge'),
    ):
      for key, table in (feats or {}).items():
        if ids is None or key not in ids or ids[key].numel() != table.size(0):
          raise ValueError(f'{what}_feat{_of(key)} needs {what}_feat_ids, one id per row')

  # -- one round: rows to their partitions --------------------------------------

  def _route(self, rows: Rows, owner: torch.Tensor, ids: Optional[torch.Tensor], book_size: int):
    r"""Sends row ``i`` of ``rows`` to partition ``owner[i]``, chunk by
    chunk; with ``ids``, every partitioner's book records where each id went.
    Returns the rows this partition received and the book (or None)."""
    self._mgr.reset(book_size, generate_pb=ids is not None)
    barrier()  # every partitioner has reset before anyone sends
    for start in range(0, owner.numel(), self.chunk_size):
      part = owner[start : start + self.chunk_size]
      chunk = tuple(r[start : start + self.chunk_size] for r in rows)
      chunk_ids = ids[start : start + self.chunk_size] if ids is not None else part
      results = []
      for p in range(self.num_parts):
        sel = (part == p).nonzero().view(-1)
        results.append((tuple(r.index_select(0, sel) for r in chunk), chunk_ids[sel]))
      self._mgr.process(results)
    barrier()  # every partitioner has sent
    return self._mgr.received(len(rows)), self._mgr.partition_book

  def _partition_node(self, ntype) -> torch.Tensor:
    r"""The node partition book of ``ntype``: this process draws the
    partitions of its share of the ids, balanced and at random."""
    n = int(self.num_nodes[ntype])
    bounds = torch.linspace(0, n, self.num_parts + 1).long().tolist()
    lo, hi = bounds[self.current_partition_idx], bounds[self.current_partition_idx + 1]
    mine = torch.arange(lo, hi)
    owner = (torch.randperm(hi - lo) + lo) % self.num_parts
    _, book = self._route((mine,), owner, mine, n)
    return book

  def _partition_graph(self, node_pbs: Dict, etype) -> Tuple[GraphPartitionData, torch.Tensor]:
    rows, cols = self.edge_index[etype][0], self.edge_index[etype][1]
    eids = self.edge_ids[etype]
    src_t, dst_t = (etype[0], etype[-1]) if self.hetero else (None, None)
    by_src = self.edge_assign_strategy == 'by_src'
    owner = node_pbs[src_t if by_src else dst_t].index_select(0, rows if by_src else cols)
    (r, c, e), book = self._route((rows, cols, eids), owner, eids, self.num_edges[etype])
    if bool((book < 0).any()):
      missing = int((book < 0).nonzero()[0])
      raise ValueError(
        f'no process holds edge id {missing}{_of(etype)}: edge_ids must cover [0, '
        f'{self.num_edges[etype]}) exactly once across the processes'
      )
    order = torch.argsort(e)
    return GraphPartitionData(torch.stack([r[order], c[order]]), e[order]), book

  def _partition_feat(self, feats, feat_ids, key, book) -> Optional[FeaturePartitionData]:
    if not feats or key not in feats:
      return None
    ids = feat_ids[key]
    (table, got_ids), _ = self._route((feats[key], ids), book.index_select(0, ids), None, 0)
    order = torch.argsort(got_ids)
    return FeaturePartitionData(table[order], got_ids[order])

  def partition(self) -> None:
    r"""Partitions with every other partitioner and writes this process's
    partition (edges, features, partition books and META.json)."""
    idx = self.current_partition_idx
    node_pbs = {t: self._partition_node(t) for t in self._ntypes}
    node_parts = {
      t: self._partition_feat(self.node_feat, self.node_feat_ids, t, node_pbs[t])
      for t in self._ntypes
    }
    graphs, edge_pbs, edge_parts = {}, {}, {}
    for etype in self._etypes:
      graphs[etype], edge_pbs[etype] = self._partition_graph(node_pbs, etype)
      edge_parts[etype] = self._partition_feat(
        self.edge_feat, self.edge_feat_ids, etype, edge_pbs[etype]
      )
    # One process at a time: partitioners that share a directory share its META.json.
    for writer in range(self.num_parts):
      if writer == idx:
        self._write(node_pbs, node_parts, graphs, edge_pbs, edge_parts)
      barrier()
    logger.info('partition %d of %d written to %s', idx, self.num_parts, self.output_dir)

  def _write(self, node_pbs, node_parts, graphs, edge_pbs, edge_parts) -> None:
    out, idx = self.output_dir, self.current_partition_idx
    ensure_dir(out)
    for ntype, book in node_pbs.items():
      save_node_pb(out, GLTPartitionBook(book, self.num_parts), ntype)
      if node_parts[ntype] is not None:
        save_feature_partition(out, idx, node_parts[ntype], 'node_feat', ntype)
    for etype, graph in graphs.items():
      save_edge_pb(out, GLTPartitionBook(edge_pbs[etype], self.num_parts), etype)
      save_graph_partition(out, idx, graph, etype)
      if edge_parts[etype] is not None:
        save_feature_partition(out, idx, edge_parts[etype], 'edge_feat', etype)
    save_meta(
      out,
      self.num_parts,
      'hetero' if self.hetero else 'homo',
      self.node_types,
      self.edge_types,
      edge_assign_strategy=self.edge_assign_strategy,
      partitioner=type(self).__name__,
      num_nodes={_key(t, True): int(n) for t, n in self.num_nodes.items()},
      num_edges={_key(e, False): int(n) for e, n in self.num_edges.items()},
      complete=True,
    )


def _key(type_, is_node: bool) -> str:
  if type_ is None:
    type_ = HOMO_NODE_TYPE if is_node else HOMO_EDGE_TYPE
  return type_key(type_)


def _of(key) -> str:
  return '' if key is None else f' of {key}'


def _as_dict(value, dtype: torch.dtype, name: str) -> Optional[Dict]:
  if value is None:
    return None
  if not isinstance(value, dict):
    raise TypeError(f'{name} must be a dict by type for a heterogeneous graph')
  out = {}
  for key, v in value.items():
    t = convert_to_tensor(v)
    if isinstance(t, (list, tuple)):
      t = torch.stack([convert_to_tensor(x) for x in t])
    out[tuple(key) if isinstance(key, list) else key] = t.to(dtype) if t.dtype != dtype else t
  return out


__all__ = [
  'DistPartitionManager',
  'DistRandomPartitioner',
  'RpcUpdatePartitionBookCallee',
  'RpcUpdatePartitionValueCallee',
]
