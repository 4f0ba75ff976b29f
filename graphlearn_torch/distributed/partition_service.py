"""PartitionService: one process's partition, served to its peers.

Every sampling process (a worker-mode trainer or sampler, a server) builds
one. It is the process's single one-hop sampler: it answers the hops of its
own samplers' seeds that this partition owns, and the peers' requests for
what only this partition can do (one hop from its nodes, edge checks on its
rows, the edges of its rows among a set of nodes, its feature rows). It also
routes this process's own requests for other partitions. Requests carry the
sampling options, so one service serves every sampler of its process,
whatever their configuration.
"""

from typing import Optional

import torch

from ..sampler.base import NeighborOutput
from ..sampler.multihop import RandomStream, SamplingSchema, check_graphs, sample_one_hop
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
    graphs = self.dist_graph.local_graphs()
    check_graphs(graphs, self.edge_dir)
    self.schema = SamplingSchema.from_graphs(graphs, self.edge_dir, self.dist_graph.is_hetero)
    self.schema.pad_rows(graphs)
    # Peers' hops draw from torch's global generator, as unseeded sampling does.
    self._random = RandomStream()

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
    # Only now has every process its callees and the table: partitions on
    # this host map each other's feature tables.
    for feature in (self.node_feature, self.edge_feature):
      if feature is not None:
        feature.connect_host_peers()

  def _dist_feature(self, features, book) -> Optional[DistFeature]:
    if features is None:
      return None
    return DistFeature(self.num_partitions, self.partition_idx, features, book)

  def sample_one_hop(
    self,
    seeds: torch.Tensor,
    fanout: int,
    etype: EdgeType,
    with_edge: bool = False,
    with_weight: bool = False,
    rng_seed: Optional[int] = None,
  ) -> NeighborOutput:
    r"""``fanout`` neighbors (-1: all) along ``etype`` of seeds this
    partition owns.

    Args:
      seeds: the seeds.
      fanout: neighbors per seed.
      etype: the edge type.
      with_edge: return the sampled edges' ids.
      with_weight: draw proportionally to edge weights.
      rng_seed: the kernel's random seed (default: drawn from torch's
        global generator).
    """
    if rng_seed is None:
      rng_seed = self._random.kernel_seed()
    topo = self.dist_graph.get_local_graph(etype).device_topology()
    # On the graph's device (a GPU for 'CUDA' and 'ZERO_COPY' partitions);
    # the pieces of a hop meet on the CPU.
    return sample_one_hop(topo, seeds, fanout, rng_seed, with_edge, with_weight).to('cpu')

  def has_edge(self, rows: torch.Tensor, cols: torch.Tensor, etype: EdgeType) -> torch.Tensor:
    r"""Whether each (row, col) is an edge; the rows are this partition's."""
    topo = self.dist_graph.get_local_graph(etype).device_topology()
    device = topo.indptr.device
    return torch.ops.glt.has_edge(topo.indptr, topo.indices, rows.to(device), cols.to(device)).cpu()

  def subgraph_edges(self, nodes: torch.Tensor, with_edge: bool = False):
    r"""``(rows, cols, edge ids)`` of this partition's edges among ``nodes``,
    in the local numbering of ``nodes`` (homogeneous graphs)."""
    topo = self.dist_graph.get_local_graph(HOMO_EDGE_TYPE).device_topology()
    edges = torch.ops.glt.induced_subgraph(
      topo.indptr, topo.indices, topo.edge_ids if with_edge else None, nodes.to(topo.indptr.device)
    )
    return tuple(t.cpu() for t in edges)
