"""PartitionService: one process's partition, served to its peers.

Every sampling process (a worker-mode trainer or sampler, a server) builds
one. It is the process's single one-hop sampler: it answers the hops of its
own samplers' seeds that this partition owns, and the peers' requests for
what only this partition can do (one hop from its nodes, edge checks on its
rows, the edges of its rows among a set of nodes, its feature rows). It also
routes this process's own requests for other partitions. Requests carry the
sampling options, so one service serves every sampler of its process,
whatever their configuration.

Partitions whose processes run on this host are not asked at all: the
service maps their topologies (and feature tables, see ``DistFeature``) from
the host's shared memory and runs their steps in place, as it runs its own.
"""

import logging
import threading
from typing import Dict, List, Optional

import torch

from ...data.graph import DeviceTopology, Graph, Topology, TopologyHostHandle
from ...sampler.base import NeighborOutput
from ...sampler.multihop import RandomStream, SamplingSchema, check_graphs, sample_one_hop
from ...typing import HOMO_EDGE_TYPE, EdgeType
from ...utils.host_share import HostShareError, ProcessWatch, boot_id, share_host_partitions
from ..dist_dataset import DistDataset
from ..dist_feature import DistFeature
from ..dist_graph import DistGraph
from ..runtime.rpc import (
  RpcCalleeBase,
  RpcDataPartitionRouter,
  rpc_register,
  rpc_request_async,
  rpc_sync_data_partitions,
)

logger = logging.getLogger(__name__)


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
    self.topology_share_callee_id = rpc_register(RpcMethodCallee(self.topology_handles))
    self._share_lock = threading.Lock()
    # partition -> its topologies by edge type, mapped from a process of this host
    self.host_peers: Dict[int, Dict[EdgeType, DeviceTopology]] = {}
    self._host_watch = ProcessWatch()  # the processes of host_peers' partitions
    self.node_feature = self._dist_feature(data.node_features, data.node_feat_pb)
    self.edge_feature = self._dist_feature(data.edge_features, data.edge_feat_pb)
    self.router = RpcDataPartitionRouter(
      rpc_sync_data_partitions(data.num_partitions, data.partition_idx)
    )
    for feature in (self.node_feature, self.edge_feature):
      if feature is not None:
        feature.rpc_router = self.router
    # Only now has every process its callees and the table: partitions on
    # this host map each other's topologies and feature tables.
    self.connect_host_peers()
    for feature in (self.node_feature, self.edge_feature):
      if feature is not None:
        feature.connect_host_peers()

  def _dist_feature(self, features, book) -> Optional[DistFeature]:
    if features is None:
      return None
    return DistFeature(self.num_partitions, self.partition_idx, features, book)

  # -- partitions on this host -------------------------------------------------

  def topology_handles(
    self, requester_boot_id: str
  ) -> Optional[Dict[EdgeType, TopologyHostHandle]]:
    r"""The handles of this partition's topologies by edge type for a
    process of this host, moving them into host-shared memory on the first
    request; None for a process of another host, or when sharing is off.

    Args:
      requester_boot_id: the requesting process's host boot id.
    """
    if not share_host_partitions() or requester_boot_id != boot_id():
      return None
    with self._share_lock:  # two peers asking at once move the tensors once
      return {etype: g.topo.host_share() for etype, g in self.dist_graph.local_graphs().items()}

  def connect_host_peers(self) -> List[int]:
    r"""Maps the topologies of the partitions held by processes of this host,
    whose steps then run here instead of over RPC, and watches those
    processes (``check_host_peers``); returns those partitions. Every
    process of the group must have registered its callees (and the router
    must be set) before any calls this. Only a service that samples on the
    CPU maps them: a GPU partition's peers stay on RPC.
    """
    graphs = self.dist_graph.local_graphs()
    if not share_host_partitions() or any(g.mode != 'CPU' for g in graphs.values()):
      return []
    # Every holder of a partition answers, so that each of them is watched.
    asked = {
      p: [
        (worker, rpc_request_async(worker, self.topology_share_callee_id, (boot_id(),)))
        for worker in self.router.partition2workers[p]
      ]
      for p in range(self.num_partitions)
      if p != self.partition_idx
    }
    for p, requests in asked.items():
      answers = [(worker, fut.wait()) for worker, fut in requests]
      if any(handles is None for _, handles in answers):
        continue  # on another host, or not sharing: RPC
      worker, handles = answers[0]
      if set(handles) != set(graphs):
        raise RuntimeError(
          f'partition {p} ({worker}) has edge types {sorted(handles)}, this one {sorted(graphs)}'
        )
      try:
        topologies = {
          etype: Graph(Topology.from_host_handle(h), mode='CPU').device_topology()
          for etype, h in handles.items()
        }
        for worker, handles in answers:
          pid = next(iter(handles.values())).pid
          self._host_watch.add(pid, f'partition {p} ({worker}): its process {pid} on this host')
      except HostShareError as e:  # another PID namespace, or its holder left
        logger.info('partition %d: its sampling stays on RPC (%s)', p, e)
        continue
      self.host_peers[p] = topologies
    if self.host_peers:
      logger.info(
        'partition %d samples the topologies of partitions %s from this host\'s shared memory',
        self.partition_idx, sorted(self.host_peers),
      )  # fmt: skip
    return sorted(self.host_peers)

  def check_host_peers(self) -> None:
    r"""Raises RuntimeError when a process of a partition mapped from this
    host (``connect_host_peers``) has exited: its memory stays mapped here,
    so no failed request would tell."""
    if self.host_peers:
      self._host_watch.check()

  def runs_here(self, partition: int) -> bool:
    r"""Whether ``partition``'s steps run in this process: it is this
    partition, or one mapped from this host (``connect_host_peers``)."""
    return partition == self.partition_idx or partition in self.host_peers

  def _topology(self, etype: EdgeType, partition: Optional[int]) -> DeviceTopology:
    if partition is None or partition == self.partition_idx:
      return self.dist_graph.get_local_graph(etype).device_topology()
    return self.host_peers[partition][etype if self.dist_graph.is_hetero else HOMO_EDGE_TYPE]

  # -- one partition's steps ---------------------------------------------------

  def sample_one_hop(
    self,
    seeds: torch.Tensor,
    fanout: int,
    etype: EdgeType,
    with_edge: bool = False,
    with_weight: bool = False,
    rng_seed: Optional[int] = None,
    partition: Optional[int] = None,
  ) -> NeighborOutput:
    r"""``fanout`` neighbors (-1: all) along ``etype`` of seeds that one
    partition owns.

    Args:
      seeds: the seeds.
      fanout: neighbors per seed.
      etype: the edge type.
      with_edge: return the sampled edges' ids.
      with_weight: draw proportionally to edge weights.
      rng_seed: the kernel's random seed (default: drawn from torch's
        global generator).
      partition: the seeds' partition, this one or one that ``runs_here``
        (default: this one).
    """
    if rng_seed is None:
      rng_seed = self._random.kernel_seed()
    topo = self._topology(etype, partition)
    # On the graph's device (a GPU for 'CUDA' and 'ZERO_COPY' partitions);
    # the pieces of a hop meet on the CPU.
    return sample_one_hop(topo, seeds, fanout, rng_seed, with_edge, with_weight).to('cpu')

  def samples_every_partition(self) -> bool:
    r"""Whether every partition's steps run in this process, on the CPU
    (this partition and the others mapped from this host): a hop's seeds
    are then drawn in one call (``sample_one_hop_partitioned``)."""
    graphs = self.dist_graph.local_graphs().values()
    return all(g.mode == 'CPU' for g in graphs) and all(
      self.runs_here(p) for p in range(self.num_partitions)
    )

  def sample_one_hop_partitioned(
    self,
    seeds: torch.Tensor,
    parts: torch.Tensor,
    fanout: int,
    etype: EdgeType,
    rng_seeds: List[int],
    with_edge: bool = False,
    with_weight: bool = False,
  ) -> NeighborOutput:
    r"""``sample_one_hop`` for seeds of several partitions at once, when
    ``samples_every_partition``: seed i is drawn from partition
    ``parts[i]``, the draws those of sampling each partition's seeds apart
    (in order, with ``rng_seed=rng_seeds[p]``), in seed order.

    Args:
      seeds: the seeds.
      parts: each seed's partition (any integer dtype).
      fanout: neighbors per seed.
      etype: the edge type.
      rng_seeds: a kernel seed per partition (unused for partitions
        without seeds).
      with_edge: return the sampled edges' ids.
      with_weight: draw proportionally to edge weights.
    """
    topologies = [self._topology(etype, p) for p in range(self.num_partitions)]
    nbr, nbr_num, eid = torch.ops.glt.sample_neighbors_partitioned(
      [t.indptr for t in topologies],
      [t.indices for t in topologies],
      [t.edge_ids if with_edge else None for t in topologies],
      [t.edge_weights if with_weight else None for t in topologies],
      parts,
      seeds,
      int(fanout),
      False,
      rng_seeds,
    )
    return NeighborOutput(nbr, nbr_num, eid if with_edge else None)

  def has_edge(
    self, rows: torch.Tensor, cols: torch.Tensor, etype: EdgeType, partition: Optional[int] = None
  ) -> torch.Tensor:
    r"""Whether each (row, col) is an edge; the rows are one partition's
    (default: this one's; else one that ``runs_here``)."""
    topo = self._topology(etype, partition)
    device = topo.indptr.device
    return torch.ops.glt.has_edge(topo.indptr, topo.indices, rows.to(device), cols.to(device)).cpu()

  def subgraph_edges(
    self, nodes: torch.Tensor, with_edge: bool = False, partition: Optional[int] = None
  ):
    r"""``(rows, cols, edge ids)`` of one partition's edges among ``nodes``
    (default: this one's; else one that ``runs_here``), in the local
    numbering of ``nodes`` (homogeneous graphs)."""
    topo = self._topology(HOMO_EDGE_TYPE, partition)
    edges = torch.ops.glt.induced_subgraph(
      topo.indptr, topo.indices, topo.edge_ids if with_edge else None, nodes.to(topo.indptr.device)
    )
    return tuple(t.cpu() for t in edges)
