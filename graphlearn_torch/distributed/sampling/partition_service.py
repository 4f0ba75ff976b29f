"""PartitionService: one process's partition, served to its peers.

Every sampling process (a worker-mode trainer or sampler, a server) builds
one. It is the process's single one-hop sampler: it answers the hops of its
own samplers' seeds that this partition owns, and the peers' requests for
what only this partition can do (one hop from its nodes, edge checks on its
rows, the edges of its rows among a set of nodes, its feature rows). It also
routes this process's own requests to the partitions that own their nodes
(``sample_neighbors``, ``has_edges``, ``induced_edges``): one request per
partition, sent first, while the steps of the partitions that run here are
drawn, and the answers put back in request order. Requests carry the
sampling options, so one service serves every sampler of its process,
whatever their configuration.

Partitions whose processes run on this host are not asked at all: their
topologies and feature tables are mapped from the host's shared memory
(``HostPeers``) and their steps run in place, as this partition's own.
"""

from typing import Callable, Dict, List, Optional, Tuple

import torch

from ...data.graph import DeviceTopology
from ...sampler.base import NeighborOutput
from ...sampler.one_hop import sample_one_hop
from ...sampler.schema import RandomStream, SamplingSchema, check_graphs, mix_seed
from ...sampler.temporal import TIME_ATTRS, TemporalSampling
from ...typing import HOMO_EDGE_TYPE, EdgeType, NodeType
from ...utils.device import to_device_async
from ..data.dataset import DistDataset
from ..data.feature import DistFeature
from ..data.graph import DistGraph
from ..runtime.event_loop import wrap_torch_future
from ..runtime.rpc import (
  RpcDataPartitionRouter,
  rpc_register,
  rpc_request_async,
  rpc_sync_data_partitions,
)
from .host_peers import HostPeers, sampling_gpu
from .peer_requests import (
  OwnersAsked,
  RpcMethodCallee,
  RpcSamplingCallee,
  RpcTemporalSamplingCallee,
  split_by_owner,
  stitch_neighbors,
)


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
    # Temporal sampling: the time-sorted copy of the graphs, for each kind
    # of times the partition holds (a hop's request names the kind).
    self.temporal: Dict[str, TemporalSampling] = {
      time_attr: TemporalSampling(graphs, self.schema, **{time_attr: getattr(data, time_attr)})
      for time_attr in TIME_ATTRS
      if getattr(data, time_attr, None) is not None
    }
    # Peers' hops draw from torch's global generator, as unseeded sampling does.
    self._random = RandomStream()

    # Callees first, then the partition table: every process reaches the
    # table's all-gather only after registering, so no request finds a
    # callee missing.
    self.sampling_callee = rpc_register(RpcSamplingCallee(self))  # one hop, for peers
    self._temporal_sampling_callee = rpc_register(RpcTemporalSamplingCallee(self))
    self._edge_check_callee = rpc_register(RpcMethodCallee(self.has_edge))
    self._subgraph_callee = rpc_register(RpcMethodCallee(self.subgraph_edges))
    self.node_feature = self._dist_feature(data.node_features, data.node_feat_pb)
    self.edge_feature = self._dist_feature(data.edge_features, data.edge_feat_pb)
    self.host_peers = HostPeers(
      self.partition_idx,
      self.num_partitions,
      graphs,
      data.node_features,
      data.edge_features,
      {time_attr: t.graphs for time_attr, t in self.temporal.items()},
    )
    self._router = RpcDataPartitionRouter(
      rpc_sync_data_partitions(data.num_partitions, data.partition_idx)
    )
    for feature in (self.node_feature, self.edge_feature):
      if feature is not None:
        feature.rpc_router = self._router
    # Only now has every process its callees and the table: partitions on
    # this host map each other's topologies and feature tables.
    self.host_peers.connect(self._router)
    if self.node_feature is not None:
      self.node_feature.host_peers = self.host_peers.peer_node_features
    if self.edge_feature is not None:
      self.edge_feature.host_peers = self.host_peers.peer_edge_features
    # Where every partition runs here, a hop is drawn in one call; False
    # draws each partition's piece apart and stitches them (the same batch).
    self.draws_hops_in_one_call = self.samples_every_partition()
    _, self._sampling_gpu = sampling_gpu(graphs)

  def _dist_feature(self, features, book) -> Optional[DistFeature]:
    if features is None:
      return None
    return DistFeature(self.num_partitions, self.partition_idx, features, book)

  def check_sampling(self, edge_dir: str, with_weight: bool) -> None:
    r"""Raises ValueError when this partition's graphs cannot be sampled
    along ``edge_dir`` (with weights)."""
    check_graphs(self.dist_graph.local_graphs(), edge_dir, with_weight)

  def runs_here(self, partition: int, time_attr: Optional[str] = None) -> bool:
    r"""Whether ``partition``'s steps run in this process: it is this
    partition, or one mapped from this host (``HostPeers``; for temporal
    steps, with its copy sorted by ``time_attr``)."""
    if partition == self.partition_idx:
      return True
    if time_attr is None:
      return partition in self.host_peers.topologies
    return time_attr in self.host_peers.temporal_topologies.get(partition, {})

  def temporal_sampling(self, time_attr: str) -> TemporalSampling:
    r"""The partition's temporal sampling by its ``time_attr`` times.

    Raises:
      ValueError: the partition holds no such times.
    """
    if time_attr not in TIME_ATTRS:
      raise ValueError(
        f"time_attr names the partition's times: one of {TIME_ATTRS}, got {time_attr!r}"
      )
    if time_attr not in self.temporal:
      raise ValueError(
        f'time_attr={time_attr!r}, but the partition holds no {time_attr}: partition the graph '
        f'with {time_attr}=..., or add them (partition.add_partition_times) before loading it'
      )
    return self.temporal[time_attr]

  def topology(
    self, etype: EdgeType, partition: Optional[int], time_attr: Optional[str] = None
  ) -> DeviceTopology:
    r"""The topology of ``etype`` (sorted by ``time_attr``'s times) of a
    partition that ``runs_here`` (None: this one), where its kernels read it."""
    if not self.dist_graph.is_hetero:
      etype = HOMO_EDGE_TYPE
    if partition is None or partition == self.partition_idx:
      if time_attr is not None:
        return self.temporal_sampling(time_attr).graphs[etype].device_topology()
      return self.dist_graph.get_local_graph(etype).device_topology()
    if time_attr is not None:
      return self.host_peers.temporal_topologies[partition][time_attr][etype]
    return self.host_peers.topologies[partition][etype]

  # -- a request, on the partitions that own its nodes ---------------------------

  def ask_owners(
    self, ntype: NodeType, tensors: Tuple[torch.Tensor, ...], callee_id: int, *args,
    time_attr: Optional[str] = None,
  ) -> OwnersAsked:  # fmt: skip
    r"""Splits the positions of ``tensors`` by the owner of ``tensors[0]``'s
    nodes and sends the pieces of partitions whose steps run in other
    processes (one request a partition, ``callee_id(*piece, *args)``);
    returns them with the partitions whose steps run here (this one, those
    mapped from this host: ``runs_here(p, time_attr)``), for the caller to
    run before it awaits the answers."""
    self.host_peers.check()
    book = self.dist_graph.node_book(ntype)
    positions, pieces = split_by_owner(book, tensors, self.num_partitions)
    owners = [p for p, pos in enumerate(positions) if pos.numel()]
    away = [p for p in owners if not self.runs_here(p, time_attr)]
    asked = OwnersAsked(positions, pieces, [p for p in owners if p not in away])
    for p in away:
      worker = self._router.get_to_worker(p)
      answer = wrap_torch_future(rpc_request_async(worker, callee_id, pieces[p] + args))
      asked.away.append((p, worker, answer))
    return asked

  async def _on_owners(
    self, ntype: NodeType, tensors: Tuple[torch.Tensor, ...], run_here: Callable,
    callee_id: int, *args, time_attr: Optional[str] = None,
  ) -> List[Tuple[torch.Tensor, object]]:  # fmt: skip
    r"""Runs a request on the partitions that own ``tensors[0]``'s nodes
    (``ask_owners``): the pieces here as ``run_here(p, *piece, *args)`` on
    the tensors' device while the others' requests are in flight. Returns
    ``(positions, result)`` per partition that had any, the positions on
    the host."""
    asked = self.ask_owners(ntype, tensors, callee_id, *args, time_attr=time_attr)
    device = tensors[0].device
    parts = []
    for p in asked.here:
      piece = (to_device_async(t, device) for t in asked.pieces[p])
      parts.append((asked.positions[p], run_here(p, *piece, *args)))
    return parts + await asked.answers()

  def samples_every_partition(self) -> bool:
    r"""Whether every partition's steps run in this process, on one device
    (this partition and the others mapped from this host, on the CPU or
    read by this partition's GPU): a hop's seeds are then drawn in one call
    (``sample_one_hop_partitioned``)."""
    one_device, _ = sampling_gpu(self.dist_graph.local_graphs())
    return one_device and all(self.runs_here(p) for p in range(self.num_partitions))

  @property
  def hop_device(self) -> torch.device:
    r"""Where a sampler's hop loop runs and a hop's pieces meet: the GPU this
    partition samples on (a hop drawn there in one call where every
    partition's steps run there, else its pieces drawn here stay there and
    those of peers over RPC are moved there), else the CPU."""
    if self._sampling_gpu is not None:
      return torch.device('cuda', self._sampling_gpu)
    return torch.device('cpu')

  async def sample_neighbors(
    self,
    seed_type: NodeType,
    seeds: torch.Tensor,
    fanout: int,
    etype: EdgeType,
    hop_seed: int,
    with_edge: bool = False,
    with_weight: bool = False,
    seed_time: Optional[torch.Tensor] = None,
    time_attr: Optional[str] = None,
    last: bool = False,
  ) -> NeighborOutput:
    r"""One hop from ``seeds`` (of node type ``seed_type``), each seed's
    neighbors drawn by the partition that owns it, in seed order; in
    temporal sampling (``seed_time``) each seed only among the edges
    (neighbors) of time <= its time, where ``etype`` has times.

    Args:
      seed_type: the seeds' node type.
      seeds: the seeds.
      fanout: neighbors per seed (-1: all).
      etype: the edge type.
      hop_seed: the hop's random seed: partition ``p`` draws its seeds'
        neighbors with kernel seed ``mix_seed(hop_seed, p)``, wherever it
        runs.
      with_edge: return the sampled edges' ids.
      with_weight: draw proportionally to edge weights.
      seed_time: each seed's time (temporal sampling), or None.
      time_attr: the partition's times to bound by: 'node_time' or
        'edge_time' (with ``seed_time``).
      last: take the latest allowed neighbors (temporal 'last').
    """
    if seed_time is not None and etype in self.temporal_sampling(time_attr).graphs:
      return await self._sample_temporal(
        seed_type,
        seeds,
        seed_time,
        fanout,
        etype,
        hop_seed,
        with_edge,
        with_weight,
        time_attr,
        last,
      )
    if self.draws_hops_in_one_call:
      # One call draws the hop, as sampling each partition's seeds apart
      # (with its kernel seed) and stitching them would; on the seeds'
      # device, with nothing read back.
      self.host_peers.check()
      parts = self.dist_graph.node_book(seed_type).lookup_on(seeds.device).partitions(seeds)
      rng_seeds = [mix_seed(hop_seed, p) for p in range(self.num_partitions)]
      return self.sample_one_hop_partitioned(
        seeds, parts, fanout, etype, rng_seeds, with_edge, with_weight
      )

    def here(partition, seeds, fanout, etype, with_edge, with_weight, hop_seed) -> NeighborOutput:
      rng_seed = mix_seed(hop_seed, partition)
      return self.sample_one_hop(seeds, fanout, etype, with_edge, with_weight, rng_seed, partition)

    parts = await self._on_owners(
      seed_type,
      (seeds,),
      here,
      self.sampling_callee,
      fanout,
      etype,
      with_edge,
      with_weight,
      hop_seed,
    )
    return stitch_neighbors(seeds.numel(), parts, with_edge, seeds.device)

  async def _sample_temporal(
    self,
    seed_type: NodeType,
    seeds: torch.Tensor,
    seed_time: torch.Tensor,
    fanout: int,
    etype: EdgeType,
    hop_seed: int,
    with_edge: bool,
    with_weight: bool,
    time_attr: str,
    last: bool,
  ) -> NeighborOutput:
    r"""``sample_neighbors`` of a temporal hop: each partition's seeds
    drawn apart (kernel seed ``mix_seed(hop_seed, p)``) from its
    time-sorted copy, here or over RPC, and stitched."""

    def here(p, seeds, seed_time, fanout, etype, with_edge, with_weight, hop_seed, time_attr, last):
      rng_seed = mix_seed(hop_seed, p)
      return self.sample_one_hop(
        seeds, fanout, etype, with_edge, with_weight, rng_seed, p, seed_time, time_attr, last
      )

    parts = await self._on_owners(
      seed_type,
      (seeds, seed_time),
      here,
      self._temporal_sampling_callee,
      fanout,
      etype,
      with_edge,
      with_weight,
      hop_seed,
      time_attr,
      last,
      time_attr=time_attr,
    )
    return stitch_neighbors(seeds.numel(), parts, with_edge, seeds.device)

  async def has_edges(
    self, row_type: NodeType, rows: torch.Tensor, cols: torch.Tensor, etype: EdgeType
  ) -> torch.Tensor:
    r"""Whether each (row, col) is an edge, asked of the partition that owns
    the row (the side of ``etype`` whose edges a partition stores).

    Args:
      row_type: the rows' node type.
      rows: the rows.
      cols: the columns.
      etype: the edge type.
    """
    parts = await self._on_owners(
      row_type,
      (rows, cols),
      lambda p, rows, cols, etype: self.has_edge(rows, cols, etype, p),
      self._edge_check_callee,
      etype,
    )
    found = torch.zeros(rows.numel(), dtype=torch.bool)
    for pos, hit in parts:
      found[pos] = hit
    return found

  async def induced_edges(self, nodes: torch.Tensor, with_edge: bool = False):
    r"""``(rows, cols, edge ids)`` of the graph's edges among ``nodes``, in
    their local numbering: every partition finds those of its own rows
    (homogeneous graphs).

    Args:
      nodes: the nodes.
      with_edge: return the edges' ids.
    """
    self.host_peers.check()
    partitions = range(self.num_partitions)
    futures = [
      wrap_torch_future(
        rpc_request_async(self._router.get_to_worker(p), self._subgraph_callee, (nodes, with_edge))
      )
      for p in partitions
      if not self.runs_here(p)
    ]
    pieces = [self.subgraph_edges(nodes, with_edge, p) for p in partitions if self.runs_here(p)]
    for fut in futures:
      pieces.append(await fut)
    return tuple(torch.cat([piece[i] for piece in pieces]) for i in range(3))

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
    seed_time: Optional[torch.Tensor] = None,
    time_attr: Optional[str] = None,
    last: bool = False,
  ) -> NeighborOutput:
    r"""``fanout`` neighbors (-1: all) along ``etype`` of seeds that one
    partition owns (temporal: among those of time <= each seed's time).

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
      seed_time: each seed's time (temporal sampling), or None.
      time_attr: the times to bound by ('node_time' or 'edge_time'; with
        ``seed_time``).
      last: take the latest allowed neighbors.
    """
    if rng_seed is None:
      rng_seed = self._random.kernel_seed()
    timed = seed_time is not None
    topo = self.topology(etype, partition, time_attr if timed else None)
    # On the graph's device (a GPU for 'CUDA' and 'ZERO_COPY' partitions),
    # the answer on the seeds' (where the hop's pieces meet: hop_device).
    out = sample_one_hop(
      topo, seeds, fanout, rng_seed, with_edge, with_weight, False, seed_time, timed and last
    )
    return out.to(seeds.device)

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
    (in order, with ``rng_seed=rng_seeds[p]``), in seed order, on the seeds'
    device.

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
    topologies = [self.topology(etype, p) for p in range(self.num_partitions)]
    device = topologies[0].indptr.device
    nbr, nbr_num, eid = torch.ops.glt.sample_neighbors_partitioned(
      [t.indptr for t in topologies],
      [t.indices for t in topologies],
      [t.edge_ids if with_edge else None for t in topologies],
      [t.edge_weights if with_weight else None for t in topologies],
      parts.to(device),
      seeds.to(device),
      int(fanout),
      False,
      rng_seeds,
    )
    return NeighborOutput(nbr, nbr_num, eid if with_edge else None).to(seeds.device)

  def has_edge(
    self, rows: torch.Tensor, cols: torch.Tensor, etype: EdgeType, partition: Optional[int] = None
  ) -> torch.Tensor:
    r"""Whether each (row, col) is an edge; the rows are one partition's
    (default: this one's; else one that ``runs_here``)."""
    topo = self.topology(etype, partition)
    device = topo.indptr.device
    return torch.ops.glt.has_edge(topo.indptr, topo.indices, rows.to(device), cols.to(device)).cpu()

  def subgraph_edges(
    self, nodes: torch.Tensor, with_edge: bool = False, partition: Optional[int] = None
  ):
    r"""``(rows, cols, edge ids)`` of one partition's edges among ``nodes``
    (default: this one's; else one that ``runs_here``), in the local
    numbering of ``nodes`` (homogeneous graphs)."""
    topo = self.topology(HOMO_EDGE_TYPE, partition)
    edges = torch.ops.glt.induced_subgraph(
      topo.indptr, topo.indices, topo.edge_ids if with_edge else None, nodes.to(topo.indptr.device)
    )
    return tuple(t.cpu() for t in edges)
