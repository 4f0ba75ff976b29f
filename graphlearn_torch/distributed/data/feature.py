"""DistFeature: feature rows of the whole graph, the local ones read in place,
those of partitions held on this host read from their shared memory, and the
others fetched from their partitions in one request each."""

import logging
from typing import Dict, List, Optional, Tuple, Union

import torch

from ...channel import DeferredTensor
from ...data import Feature
from ...data.gather_checks import GatherChecks
from ...partition.partition_book import PartitionBook, positions_by_partition
from ...typing import HOMO_EDGE_TYPE, HOMO_NODE_TYPE, EdgeType, NodeType
from ...utils.device import to_device_async
from ...utils.futures import completed, then
from ..runtime.rpc import RpcCalleeBase, RpcDataPartitionRouter, rpc_register, rpc_request_async
from .held_tables import HeldTables, held_tables

TypeKey = Optional[Union[NodeType, EdgeType]]
Features = Union[Feature, Dict[Union[NodeType, EdgeType], Feature]]
logger = logging.getLogger(__name__)


def check_scattered_rows(out: torch.Tensor, positions: torch.Tensor, rows: torch.Tensor) -> None:
  r"""Raises ValueError where ``scatter_rows_(out, positions, rows)`` would:
  with its words, checked where ``positions`` and ``rows`` are (the host)."""
  if out.dim() != 2 or rows.dim() != 2:
    raise ValueError(
      f'scatter_rows_: out and rows must be 2-D, got {out.dim()}-D and {rows.dim()}-D'
    )
  if out.dtype != rows.dtype:
    # (in C++'s names of the dtypes, as the op says them: 'Float', 'Long')
    names = [
      t.new_empty(0, device='cpu').type()[len('torch.') : -len('Tensor')] for t in (out, rows)
    ]
    raise ValueError(f'scatter_rows_: out is {names[0]} but rows are {names[1]}')
  if out.size(1) != rows.size(1):
    raise ValueError(
      f'scatter_rows_: out rows have {out.size(1)} columns but rows have {rows.size(1)}'
    )
  if positions.dim() != 1 or positions.dtype != torch.int64:
    raise ValueError('scatter_rows_: positions must be a 1-D int64 tensor')
  if positions.numel() != rows.size(0):
    raise ValueError(f'scatter_rows_: {positions.numel()} positions for {rows.size(0)} rows')
  outside = (positions < 0) | (positions >= out.size(0))
  if bool(outside.any()):
    i = int(outside.nonzero()[0])
    raise ValueError(
      f'scatter_rows_: positions[{i}] is {int(positions[i])}, out of range [0, {out.size(0)})'
    )


def placed_on_gpu(out: torch.Tensor, pieces: List[Tuple[torch.Tensor, torch.Tensor]]):
  r"""``out`` (a GPU's) with each piece's rows written at its positions, as
  ``scatter_rows_`` writes them, without a host sync: the positions and the
  rows (a peer's, as RPC brings them) are on the host and checked there,
  then move to the GPU staged in pinned memory (the op, given them on the
  GPU, reads its check back).

  Args:
    out: the rows gathered on the GPU, written in place.
    pieces: ``(positions, rows)`` per peer's answer, on the host.
  """
  for pos, rows in pieces:
    check_scattered_rows(out, pos, rows)
    out.index_copy_(0, to_device_async(pos, out.device), to_device_async(rows, out.device))
  return out


class RpcFeatureLookupCallee(RpcCalleeBase):
  r"""Serves peers' requests for this partition's feature rows."""

  def __init__(self, dist_feature: 'DistFeature'):
    self.dist_feature = dist_feature

  def call(self, *args, **kwargs) -> torch.Tensor:
    # gathered on the GPU where the table uses one; sent from host memory
    return self.dist_feature.local_get(*args, **kwargs).cpu()


class DistFeature:
  r"""Feature rows by global id, wherever they live.

  Rows this partition holds (its own and cached ones: the feature book sends
  cached ids here) are read locally; so are the rows of the partitions in
  ``host_peers``, tables of processes of this host mapped from their shared
  memory (``PartitionService`` sets them, see ``HostPeers``). The rest go to their partitions, one
  asynchronous request per partition, and come back stitched in input order.
  Building one registers RPC callees, so every process of the group must
  build its DistFeatures in the same order.

  Args:
    num_partitions: how many partitions there are.
    partition_idx: this partition.
    local_feature: its Feature (a dict by node or edge type when heterogeneous).
    feature_pb: where each row lives (a dict by type when heterogeneous).
    local_only: never ask peers (every requested row must be local).
    rpc_router: which worker to ask for a partition's rows (may be set
      later, before the first request that needs a peer).
    device: where results go.
  """

  def __init__(
    self,
    num_partitions: int,
    partition_idx: int,
    local_feature: Union[Feature, Dict[Union[NodeType, EdgeType], Feature]],
    feature_pb: Union[PartitionBook, Dict[Union[NodeType, EdgeType], PartitionBook]],
    local_only: bool = False,
    rpc_router: Optional[RpcDataPartitionRouter] = None,
    device: Optional[torch.device] = None,
  ):
    self.num_partitions = num_partitions
    self.partition_idx = partition_idx
    self.is_hetero = isinstance(local_feature, dict)
    self.local_feature = local_feature
    self.feature_pb = feature_pb
    self.local_only = local_only
    self.rpc_router = rpc_router
    self.device = device or torch.device('cpu')
    self.rpc_callee_id = None if local_only else rpc_register(RpcFeatureLookupCallee(self))
    # partition -> its tables, mapped from a process of this host
    self.host_peers: Dict[int, Features] = {}
    self._gpu_tables: Dict[Tuple[TypeKey, torch.device], Optional[HeldTables]] = {}  # _gpu_table

  def _feature(self, input_type: TypeKey, features: Optional[Features] = None) -> Feature:
    features = self.local_feature if features is None else features
    if self.is_hetero:
      if input_type not in features:
        raise ValueError(f'no features for type {input_type!r}')
      return features[input_type]
    return features

  def _held_feature(self, partition: int, input_type: TypeKey) -> Optional[Feature]:
    r"""The Feature of ``partition`` if this host holds it, else None (a
    peer without the type's table is asked over RPC, which names the
    problem should any of its ids be wanted)."""
    if partition == self.partition_idx:
      return self._feature(input_type)
    peer = self.host_peers.get(partition)
    if peer is None or (self.is_hetero and input_type not in peer):
      return None
    return self._feature(input_type, peer)

  def _book(self, input_type: TypeKey) -> PartitionBook:
    return self.feature_pb[input_type] if self.is_hetero else self.feature_pb

  def local_get(self, ids: torch.Tensor, input_type: TypeKey = None) -> torch.Tensor:
    r"""Rows of ``ids``, all held by this partition."""
    return self._feature(input_type)[ids]

  def _request_rows(self, ids: torch.Tensor, input_type: TypeKey):
    r"""``(held, parts, remote)`` for the rows of ``ids``: the Feature of
    each partition held on this host (else None), the partition of each id,
    and the requests sent for the others' rows, ``(partition, worker,
    positions, future)`` each."""
    held = [self._held_feature(p, input_type) for p in range(self.num_partitions)]
    parts = self._book(input_type).partitions(ids)
    remote: List[tuple] = []
    if any(feature is None for feature in held):
      for p, pos in enumerate(positions_by_partition(parts, self.num_partitions)):
        if held[p] is None and pos.numel():
          if self.rpc_router is None:
            raise RuntimeError(
              f'rows of partition {p} are wanted but the DistFeature has no router'
            )
          worker = self.rpc_router.get_to_worker(p)
          request = (ids.index_select(0, pos), input_type)
          remote.append((p, worker, pos, rpc_request_async(worker, self.rpc_callee_id, request)))
    return held, parts, remote

  @staticmethod
  def _arrived(remote: List[tuple]) -> torch.futures.Future:
    r"""A future of ``(positions, rows)`` per remote request, once all have
    answered; a failed one is named."""

    def rows(collected):
      # collect_all fails as soon as one request does, while others may
      # still run: the failed one is done and named here.
      arrived = []
      for p, worker, pos, fut in remote:
        if not fut.done():
          continue
        try:
          arrived.append((pos, fut.value()))
        except Exception as e:
          raise RuntimeError(
            f'partition {p} ({worker}) failed to send feature rows: {type(e).__name__}: {e}'
          ) from e
      collected.value()
      return arrived

    return then(torch.futures.collect_all([fut for *_, fut in remote]), rows)

  def _gpu_table(
    self, input_type: TypeKey, device: torch.device, held: List[Optional[Feature]]
  ) -> Optional[HeldTables]:
    r"""The tables of the partitions held here (``held``: each partition's
    Feature, or None) as one that GPU ``device`` gathers from (``HeldTables``,
    made once for those partitions), where each is read by that GPU
    (``Feature.with_gpu``) and the book is a tensor; an id of another
    partition reads row 0 (its row is fetched over RPC and put in its
    place). Else None."""
    is_held = tuple(f is not None for f in held)
    key = (input_type, device, is_held)  # peers' tables may be mapped later
    if key not in self._gpu_tables:
      table, reason = held_tables(held, self._book(input_type), device)
      self._gpu_tables[key] = table
      homo = input_type in (None, HOMO_NODE_TYPE, HOMO_EDGE_TYPE)
      what = 'features' if homo else f'{input_type!r} features'
      local = [p for p, here in enumerate(is_held) if here]
      if table is None:
        logger.info('%s of ids on %s: gathered in host memory (%s)', what, device, reason)
      else:
        logger.info(
          '%s of ids on %s: gathered there in one call from partitions %s%s', what, device, local,
          '' if len(local) == len(held) else ', the others over RPC',
        )  # fmt: skip
    return self._gpu_tables[key]

  def _gpu_rows(self, ids: torch.Tensor, table: HeldTables, checks: GatherChecks) -> torch.Tensor:
    r"""The rows of ``ids`` (on a GPU) gathered on that GPU in one call from
    ``table`` (``_gpu_table``), each from its partition's table. The check
    that every id has a row is left in ``checks``."""
    ids = ids.to(torch.int64).view(-1)
    flag = checks.flag(ids.device, lambda: table.gather(ids))
    return table.gather(ids, flag)

  def _with_remote_rows(
    self, out: torch.Tensor, ids: torch.Tensor, input_type: TypeKey, host_ids=None
  ) -> torch.futures.Future:
    r"""A future of ``out`` (the rows of ``ids`` gathered on their GPU) with
    the rows of partitions not held here fetched over RPC and put in
    place, on the GPU. The peers are asked by ``host_ids`` where given (the
    ids on the host: no wait for the GPU), else by the ids copied there."""
    ids = host_ids if host_ids is not None else ids.cpu()
    _, _, remote = self._request_rows(ids.to(torch.int64).view(-1), input_type)
    if not remote:
      return completed(out)

    return then(self._arrived(remote), lambda arrived: placed_on_gpu(out, arrived.value()))

  def async_get(
    self,
    ids: torch.Tensor,
    input_type: TypeKey = None,
    checks: Optional[GatherChecks] = None,
    host_ids: Optional[torch.Tensor] = None,
  ) -> torch.futures.Future:
    r"""A future of the rows of ``ids``, in input order: gathered on their
    GPU where the tables held here allow it (``_gpu_rows``; other
    partitions' rows fetched over RPC and put in place there), else from
    host memory and over RPC, then moved to ``device``. The GPU gathers'
    checks of their ids are left in ``checks`` where given (a batch's, read
    once), else read here. ``host_ids``: the same ids on the host, where
    the caller has them there (peers are then asked without waiting for the
    GPU)."""
    # (a local_only lookup reads its own table alone: no placeholder rows)
    table = None
    if ids.is_cuda and not self.local_only:
      held = [self._held_feature(p, input_type) for p in range(self.num_partitions)]
      table = self._gpu_table(input_type, ids.device, held)
    if table is not None:
      own = checks is None
      checks = GatherChecks() if own else checks
      rows = self._gpu_rows(ids, table, checks)
      if own:
        checks.raise_first()
      if all(feature is not None for feature in held):
        return completed(rows)
      return self._with_remote_rows(rows, ids, input_type, host_ids)
    ids = (host_ids if host_ids is not None else ids).to(torch.int64).view(-1).cpu()
    if self.local_only:
      return completed(self.local_get(ids, input_type).to(self.device))
    held, parts, remote = self._request_rows(ids, input_type)
    # The rows of the partitions on this host go straight to their places,
    # in one call; remote ones are copied in as they arrive.
    out = self._feature(input_type).cpu_get_partitioned(held, parts, ids)
    if not remote:
      return completed(out.to(self.device))

    def stitch(arrived):
      for pos, rows in arrived.value():
        torch.ops.glt.scatter_rows_(out, pos, rows)
      return out.to(self.device)

    return then(self._arrived(remote), stitch)

  def async_deferred(
    self,
    ids: torch.Tensor,
    input_type: TypeKey = None,
    checks: Optional[GatherChecks] = None,
    host_ids: Optional[torch.Tensor] = None,
  ) -> torch.futures.Future:
    r"""A future of the rows of ``ids`` as a :class:`DeferredTensor`, once
    the remote ones arrived: the rows of this host's partitions are
    gathered when it is written (straight into a ``ShmChannel``'s message).
    Rows for a GPU or of ids on one, or of a ``local_only`` DistFeature,
    come as :meth:`async_get` gives them."""
    if self.local_only or self.device.type != 'cpu' or ids.is_cuda:
      return self.async_get(ids, input_type, checks, host_ids)
    ids = ids.to(torch.int64).view(-1).cpu()
    held, parts, remote = self._request_rows(ids, input_type)
    feature = self._feature(input_type)

    def deferred(arrived: List[tuple]) -> DeferredTensor:
      def write(out: torch.Tensor) -> None:
        feature.cpu_get_partitioned(held, parts, ids, out)
        for pos, rows in arrived:
          torch.ops.glt.scatter_rows_(out, pos, rows)

      return DeferredTensor((ids.numel(), feature.size(1)), feature.dtype, write)

    if not remote:
      return completed(deferred([]))
    return then(self._arrived(remote), lambda arrived: deferred(arrived.value()))

  def __getitem__(self, ids: torch.Tensor) -> torch.Tensor:
    return self.async_get(ids).wait()

  def get(self, ids: torch.Tensor, input_type: TypeKey = None) -> torch.Tensor:
    r"""The rows of ``ids``, in input order (waits for peers)."""
    return self.async_get(ids, input_type).wait()
