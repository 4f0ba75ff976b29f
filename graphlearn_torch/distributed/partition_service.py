"""PartitionService: one process's partition, served to its peers.

Every sampling process (a worker-mode trainer or sampler, a server) builds
one. It answers the peers' requests for what only this partition can do (one
hop from its nodes, edge checks on its rows, the edges of its rows among a
set of nodes, its feature rows) and routes this process's own requests for
other partitions. The requests carry the sampling options, so one service
serves every sampler of its process, whatever their configuration.
"""

import threading
from typing import Dict, Optional, Tuple

import torch

from .._ext import ops
from ..sampler.base import NeighborOutput
from ..sampler.neighbor_sampler import NeighborSampler
from ..typing import HOMO_EDGE_TYPE, EdgeType
from .dist_dataset import DistDataset
from .dist_feature import DistFeature
from .dist_graph import DistGraph
from .rpc import RpcCalleeBase, RpcDataPartitionRouter, rpc_register, rpc_sync_data_partitions


class RpcSamplingCallee(RpcCalleeBase):
  r"""Samples one hop from this partition's seeds for a peer."""

  def __init__(self, service: 'PartitionService'):
    self.service = service

  def call(self, seeds, fanout, etype, with_edge=False, with_weight=False) -> NeighborOutput:
    return self.service.sample_one_hop(seeds, fanout, etype, with_edge, with_weight)


class RpcMethodCallee(RpcCalleeBase):
  r"""Runs one of the service's local steps for a peer (an edge check, the
  edges among a peer's nodes)."""

  def __init__(self, method):
    self.method = method

  def call(self, *args):
    return self.method(*args)


class PartitionService:
  r"""This process's partition, for its peers and its own samplers.

  Building one is collective: every process of the group builds its service
  at the same point, so the RPC callees get the same ids everywhere, and the
  group learns which process holds which partition.

  Args:
    data: this process's partition.
  """

  def __init__(self, data: DistDataset):
    self.data = data
    self.num_partitions = data.num_partitions
    self.partition_idx = data.partition_idx
    self.edge_dir = data.edge_dir
    self.dist_graph = DistGraph(
      data.num_partitions, data.partition_idx, data.graph, data.node_pb, data.edge_pb
    )
    self._samplers: Dict[Tuple[bool, bool], NeighborSampler] = {}
    self._lock = threading.Lock()

    # Callees first, then the partition table: every process reaches the
    # table's all-gather only after registering, so no request finds a
    # callee missing.
    self.sampling_callee_id = rpc_register(RpcSamplingCallee(self))
    self.edge_check_callee_id = rpc_register(RpcMethodCallee(self.has_edge))
    self.subgraph_callee_id = rpc_register(RpcMethodCallee(self.subgraph_edges))
    self.node_feature = self._dist_feature(data.node_features, data.node_feat_pb)
    self.edge_feature = self._dist_feature(data.edge_features, data.edge_feat_pb)
    self.router = RpcDataPartitionRouter(
      rpc_sync_data_partitions(data.num_partitions, data.partition_idx)
    )
    for feature in (self.node_feature, self.edge_feature):
      if feature is not None:
        feature.rpc_router = self.router

  def _dist_feature(self, features, book) -> Optional[DistFeature]:
    if features is None:
      return None
    return DistFeature(self.num_partitions, self.partition_idx, features, book)

  def local_sampler(self, with_edge: bool = False, with_weight: bool = False) -> NeighborSampler:
    r"""A one-hop sampler over this partition's topology (one per option
    set, drawing from torch's global random stream)."""
    key = (bool(with_edge), bool(with_weight))
    with self._lock:
      sampler = self._samplers.get(key)
      if sampler is None:
        sampler = self._samplers[key] = NeighborSampler(
          self.data.graph,
          device=torch.device('cpu'),
          with_edge=key[0],
          with_weight=key[1],
          edge_dir=self.edge_dir,
        )
      return sampler

  def sample_one_hop(
    self,
    seeds: torch.Tensor,
    fanout: int,
    etype: EdgeType,
    with_edge: bool = False,
    with_weight: bool = False,
  ) -> NeighborOutput:
    r"""``fanout`` neighbors along ``etype`` of seeds this partition owns."""
    return self.local_sampler(with_edge, with_weight).sample_one_hop(seeds, fanout, etype)

  def has_edge(self, rows: torch.Tensor, cols: torch.Tensor, etype: EdgeType) -> torch.Tensor:
    r"""Whether each (row, col) is an edge; the rows are this partition's."""
    topo = self.local_sampler()._graphs[etype].topo
    return ops.has_edge(topo.indptr, topo.indices, rows, cols)

  def subgraph_edges(self, nodes: torch.Tensor, with_edge: bool = False):
    r"""``(rows, cols, edge ids)`` of this partition's edges among ``nodes``,
    in the local numbering of ``nodes`` (homogeneous graphs)."""
    topo = self.local_sampler()._graphs[HOMO_EDGE_TYPE].topo
    return ops.induced_subgraph(
      topo.indptr, topo.indices, topo.edge_ids if with_edge else None, nodes
    )
