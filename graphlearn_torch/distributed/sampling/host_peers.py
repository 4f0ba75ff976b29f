"""The partitions that other processes of this host hold, mapped in place.

Partitions of a group whose processes run on one host read each other's
topologies and feature tables from the host's shared memory instead of
asking for them over RPC. ``HostPeers`` alone does this for a process: it
hands this partition's tables to peers of its host, asks every holder of
every other partition for theirs in one RPC round, maps what they hand out,
and watches their processes: a mapped peer's memory stays valid after it
died, so no failed request would tell.
"""

import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union

from ...data import Feature, Graph
from ...data.feature import FeatureShareHandle
from ...data.graph import DeviceTopology
from ...typing import EdgeType, NodeType
from ...utils.host_share import HostShareError, ProcessWatch, boot_id, share_host_partitions
from ..data.feature import Features
from ..runtime.rpc import RpcCalleeBase, RpcDataPartitionRouter, rpc_register, rpc_request_async

logger = logging.getLogger(__name__)

FeatureHandles = Union[FeatureShareHandle, Dict[Union[NodeType, EdgeType], FeatureShareHandle]]
GraphHandle = tuple
r"""A graph's ``Graph.share_ipc`` handle: its host-shared topology, and its
GPU copy where it is a 'CUDA' graph placed on the requester's GPU."""


@dataclass
class PartitionHandles:
  r"""What a partition hands a process of its host: the handles of its tables.

  Args:
    pid: the process that answered (it holds the tables open).
    topologies: its graphs' handles by edge type.
    node_features: its node feature table's handle (a dict by type when
      heterogeneous), or None: host-shared, with the table's GPU parts and
      id map where it is placed for the GPU the requester gathers on.
    edge_features: its edge feature table's, or None.
    temporal: its time-sorted graphs' handles (temporal sampling), by the
      times they are sorted by ('node_time', 'edge_time') and edge type.
  """

  pid: int
  topologies: Dict[EdgeType, GraphHandle]
  node_features: Optional[FeatureHandles]
  edge_features: Optional[FeatureHandles]
  temporal: Dict[str, Dict[EdgeType, GraphHandle]] = field(default_factory=dict)


def _share(features: Optional[Features], gpu: Optional[int]) -> Optional[FeatureHandles]:
  r"""The handles of ``features`` for a process that gathers on GPU ``gpu``
  (None: on none; ``Feature.share_on_host``)."""
  if features is None:
    return None
  if isinstance(features, dict):
    return {t: f.share_on_host(gpu) for t, f in features.items()}
  return features.share_on_host(gpu)


def _map(handles: Optional[FeatureHandles]) -> Optional[Features]:
  r"""The Features of ``handles``, placed as their holder's are: a gather on
  their GPU reads the holder's GPU parts and id map by CUDA IPC."""
  if handles is None:
    return None
  if isinstance(handles, dict):
    return {t: Feature.from_ipc_handle(h) for t, h in handles.items()}
  return Feature.from_ipc_handle(handles)


def share_graphs(graphs: Dict[EdgeType, Graph], gpu: Optional[int]) -> Dict[EdgeType, GraphHandle]:
  r"""The handles of ``graphs`` for a process that samples on GPU ``gpu``
  (None: on the CPU): a 'CUDA' graph of that GPU is placed there first, so
  that the process reads its GPU copy by CUDA IPC; others hand over none."""
  handles = {}
  for etype, g in graphs.items():
    for_it = gpu is not None and g.mode == 'CUDA' and g.device == gpu
    if for_it:
      g.place_on_gpu(gpu)
    handles[etype] = g.share_ipc(gpu_copy=for_it)
  return handles


def map_topologies(
  handles: Dict[EdgeType, GraphHandle], gpu: Optional[int]
) -> Dict[EdgeType, DeviceTopology]:
  r"""The topologies of ``handles`` where this process samples, none
  copied: in host memory (``gpu`` None); on GPU ``gpu``, the holder's copy
  in that GPU's memory (a 'CUDA' graph placed there, read by CUDA IPC), else
  its host-shared pages registered with CUDA and read in place, as in
  'ZERO_COPY' mode."""
  topologies = {}
  for etype, handle in handles.items():
    graph = Graph.from_ipc_handle(handle)  # its GPU copy opened on first use only
    if gpu is None or graph.mode != 'CUDA' or graph.device != gpu:
      graph = Graph(graph.topo, mode='CPU' if gpu is None else 'ZERO_COPY', device=gpu)
    topologies[etype] = graph.device_topology()
  return topologies


def sampling_gpu(graphs: Dict[EdgeType, Graph]) -> Tuple[bool, Optional[int]]:
  r"""``(one device, its GPU)``: whether every graph of ``graphs`` samples
  on the same device, and that GPU's index (None for the CPU)."""
  devices = {g.sampling_device for g in graphs.values()}
  if len(devices) != 1:
    return False, None
  device = devices.pop()
  return True, None if device.type == 'cpu' else device.index


class RpcHostShareCallee(RpcCalleeBase):
  r"""Hands a process of this host the handles of this partition's tables."""

  def __init__(self, peers: 'HostPeers'):
    self.peers = peers

  def call(
    self, requester_boot_id: str, requester_gpu: Optional[int] = None
  ) -> Optional[PartitionHandles]:
    return self.peers.handles(requester_boot_id, requester_gpu)


class HostPeers:
  r"""This process's view of the partitions held on its host.

  Building one registers an RPC callee, so every process of the group builds
  it at the same point; ``connect`` then maps the others' tables.

  Args:
    partition_idx: this process's partition.
    num_partitions: how many partitions there are.
    graphs: this partition's graphs by edge type.
    node_features: its node feature table (a dict by type), or None.
    edge_features: its edge feature table, or None.
    temporal_graphs: its time-sorted graphs (temporal sampling) by the times
      they are sorted by ('node_time', 'edge_time') and edge type.
  """

  def __init__(
    self,
    partition_idx: int,
    num_partitions: int,
    graphs: Dict[EdgeType, Graph],
    node_features: Optional[Features] = None,
    edge_features: Optional[Features] = None,
    temporal_graphs: Optional[Dict[str, Dict[EdgeType, Graph]]] = None,
  ):
    self.partition_idx = partition_idx
    self.num_partitions = num_partitions
    self.graphs = graphs
    self.node_features = node_features
    self.edge_features = edge_features
    self.temporal_graphs = temporal_graphs or {}
    # partition -> what is mapped of it from this host
    self.topologies: Dict[int, Dict[EdgeType, DeviceTopology]] = {}
    self.temporal_topologies: Dict[int, Dict[str, Dict[EdgeType, DeviceTopology]]] = {}
    self.peer_node_features: Dict[int, Features] = {}
    self.peer_edge_features: Dict[int, Features] = {}
    self._lock = threading.Lock()  # two peers asking at once move the tables once
    self._watch = ProcessWatch()
    self._callee_id = rpc_register(RpcHostShareCallee(self))

  def handles(
    self, requester_boot_id: str, requester_gpu: Optional[int] = None
  ) -> Optional[PartitionHandles]:
    r"""The handles of this partition's tables for a process of this host,
    moving the tables into host-shared memory on the first request (and
    feature tables for the requester's GPU onto it); None for a process of
    another host, or when sharing is off.

    Args:
      requester_boot_id: the requesting process's host boot id.
      requester_gpu: the GPU the requester samples and gathers on (None:
        the CPU).
    """
    if not share_host_partitions() or requester_boot_id != boot_id():
      return None
    with self._lock:
      return PartitionHandles(
        pid=os.getpid(),
        topologies=share_graphs(self.graphs, requester_gpu),
        node_features=_share(self.node_features, requester_gpu),
        edge_features=_share(self.edge_features, requester_gpu),
        temporal={
          time_attr: share_graphs(graphs, requester_gpu)
          for time_attr, graphs in self.temporal_graphs.items()
        },
      )

  def connect(self, router: RpcDataPartitionRouter) -> List[int]:
    r"""Maps the tables of the partitions held by processes of this host, and
    watches those processes; returns those partitions. Their topologies are
    mapped where this partition samples: in host memory, or read in place by
    its GPU (its graphs in 'ZERO_COPY' or 'CUDA' mode); a partition whose
    graphs sample on several devices samples its peers over RPC. Every
    process of the group must have built its HostPeers before any calls
    this.

    Args:
      router: which processes hold each partition (every one is asked, so
        that each is watched).
    """
    if not share_host_partitions():
      return []
    sample_here, gpu = sampling_gpu(self.graphs)
    # GPU copies only from the first holder of each partition: its answer is mapped
    asked = {
      p: [
        (worker, rpc_request_async(worker, self._callee_id, (boot_id(), None if i else gpu)))
        for i, worker in enumerate(router.partition2workers[p])
      ]
      for p in range(self.num_partitions)
      if p != self.partition_idx
    }
    for p, requests in asked.items():
      answers = [(worker, fut.wait()) for worker, fut in requests]
      if any(handles is None for _, handles in answers):
        continue  # on another host, or not sharing: RPC
      worker, handles = answers[0]
      if set(handles.topologies) != set(self.graphs):
        raise RuntimeError(
          f'partition {p} ({worker}) has edge types {sorted(handles.topologies)}, '
          f'this one {sorted(self.graphs)}'
        )
      try:
        topologies, temporal = {}, {}
        if sample_here:
          topologies = map_topologies(handles.topologies, gpu)
          temporal = {attr: map_topologies(h, gpu) for attr, h in handles.temporal.items()}
        node_features = _map(handles.node_features)
        edge_features = _map(handles.edge_features)
        for worker, answer in answers:
          self._watch.add(answer.pid, f'partition {p} ({worker}): its process {answer.pid}')
      except HostShareError as e:  # another PID namespace, or its holder left
        logger.info('partition %d stays on RPC (%s)', p, e)
        continue
      if sample_here:
        self.topologies[p] = topologies
        self.temporal_topologies[p] = temporal
      if node_features is not None:
        self.peer_node_features[p] = node_features
      if edge_features is not None:
        self.peer_edge_features[p] = edge_features
    mapped = sorted(set(self.topologies) | set(self.peer_node_features))
    if mapped:
      logger.info(
        "partition %d maps partitions %s from this host's shared memory (topologies of %s)",
        self.partition_idx, mapped, sorted(self.topologies),
      )  # fmt: skip
    return mapped

  def check(self) -> None:
    r"""Raises RuntimeError when the process of a partition mapped here has
    exited."""
    self._watch.check()
