"""DistFeature: feature rows of the whole graph, the local ones read in place
and the others fetched from their partitions in one request each."""

from typing import Dict, List, Optional, Union

import torch

from ..data import Feature
from ..partition.partition_book import PartitionBook
from ..typing import EdgeType, NodeType
from .rpc import RpcCalleeBase, RpcDataPartitionRouter, rpc_register, rpc_request_async

TypeKey = Optional[Union[NodeType, EdgeType]]


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
  cached ids here) are read locally; the rest go to their partitions, one
  asynchronous request per partition, and come back stitched in input order.
  Building one registers an RPC callee, so every process of the group must
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

  def _feature(self, input_type: TypeKey) -> Feature:
    if self.is_hetero:
      if input_type not in self.local_feature:
        raise ValueError(f'no features for type {input_type!r}')
      return self.local_feature[input_type]
    return self.local_feature

  def _book(self, input_type: TypeKey) -> PartitionBook:
    return self.feature_pb[input_type] if self.is_hetero else self.feature_pb

  def local_get(self, ids: torch.Tensor, input_type: TypeKey = None) -> torch.Tensor:
    r"""Rows of ``ids``, all held by this partition."""
    return self._feature(input_type)[ids]

  def async_get(self, ids: torch.Tensor, input_type: TypeKey = None) -> torch.futures.Future:
    r"""A future of the rows of ``ids``, in input order."""
    ids = ids.to(torch.int64).view(-1).cpu()
    if self.local_only:
      done = torch.futures.Future()
      done.set_result(self.local_get(ids, input_type).to(self.device))
      return done
    positions, owned = self._book(input_type).group(ids, self.num_partitions)
    remote: List[tuple] = []
    for p, pos in enumerate(positions):
      if p != self.partition_idx and pos.numel():
        if self.rpc_router is None:
          raise RuntimeError(f'rows of partition {p} are wanted but the DistFeature has no router')
        worker = self.rpc_router.get_to_worker(p)
        request = (owned[p], input_type)
        remote.append((p, worker, pos, rpc_request_async(worker, self.rpc_callee_id, request)))
    if not remote:
      done = torch.futures.Future()
      done.set_result(self.local_get(ids, input_type).to(self.device))
      return done
    # Local rows go straight to their places in the output; remote ones are
    # copied in as they arrive.
    local_pos = positions[self.partition_idx]
    out = self._feature(input_type).cpu_get_at(owned[self.partition_idx], local_pos, ids.numel())

    def stitch(collected):
      # collect_all fails as soon as one request does, while others may
      # still run: the failed one is done and named here.
      for p, worker, pos, fut in remote:
        if not fut.done():
          continue
        try:
          rows = fut.value()
        except Exception as e:
          raise RuntimeError(
            f'partition {p} ({worker}) failed to send feature rows: {type(e).__name__}: {e}'
          ) from e
        torch.ops.glt.scatter_rows_(out, pos, rows)
      collected.value()
      return out.to(self.device)

    return torch.futures.collect_all([fut for *_, fut in remote]).then(stitch)

  def __getitem__(self, ids: torch.Tensor) -> torch.Tensor:
    return self.async_get(ids).wait()

  def get(self, ids: torch.Tensor, input_type: TypeKey = None) -> torch.Tensor:
    r"""The rows of ``ids``, in input order (waits for peers)."""
    return self.async_get(ids, input_type).wait()
