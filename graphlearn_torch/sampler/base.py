"""Sampler inputs and outputs (dataclasses) and the sampler interface."""

import dataclasses
import math
import numbers
from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import Enum
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

import torch

from ..typing import EdgeType, NodeType, NumNeighbors, Split
from ..utils.device import to_device_async
from ..utils.mixin import CastMixin
from .schema import draw_seed


class EdgeIndex(NamedTuple):
  """A sampled adjacency in PyG v1 form."""

  edge_index: torch.Tensor
  e_id: Optional[torch.Tensor]
  size: Tuple[int, int]

  def to(self, *args, **kwargs) -> 'EdgeIndex':
    e_id = self.e_id.to(*args, **kwargs) if self.e_id is not None else None
    return EdgeIndex(self.edge_index.to(*args, **kwargs), e_id, self.size)


@dataclass
class NodeSamplerInput(CastMixin):
  """Seed nodes of a batch.

  Args:
    node: the seed node ids.
    input_type: their node type (None for a homogeneous graph).
    time: each seed's time (temporal sampling: PyG's ``input_time``).
  """

  node: torch.Tensor
  input_type: Optional[NodeType] = None
  time: Optional[torch.Tensor] = None

  def __getitem__(self, index) -> 'NodeSamplerInput':
    if not isinstance(index, torch.Tensor):
      index = torch.as_tensor(index, dtype=torch.long)
    time = self.time[index] if self.time is not None else None
    return NodeSamplerInput(self.node[index], self.input_type, time)

  def __len__(self) -> int:
    return self.node.numel()

  def share_memory(self) -> 'NodeSamplerInput':
    self.node.share_memory_()
    if self.time is not None:
      self.time.share_memory_()
    return self

  def to(self, device: torch.device) -> 'NodeSamplerInput':
    self.node = self.node.to(device)
    if self.time is not None:
      self.time = self.time.to(device)
    return self


class NegativeSamplingMode(Enum):
  binary = 'binary'
  triplet = 'triplet'


class NegativeSampling(CastMixin):
  """How many negative edges to draw per positive edge, and how.

  Args:
    mode: 'binary' (negatives labelled 0) or 'triplet' (negative destinations
      per source).
    amount: negatives per positive edge (> 0).
    weight: optional sampling weight per destination node.
  """

  def __init__(
    self,
    mode: Union[NegativeSamplingMode, str],
    amount: Union[int, float] = 1,
    weight: Optional[torch.Tensor] = None,
  ):
    try:
      self.mode = NegativeSamplingMode(mode)
    except ValueError:
      raise ValueError(
        f"negative sampling mode must be 'binary' or 'triplet', got {mode!r}"
      ) from None
    if not isinstance(amount, numbers.Real) or not math.isfinite(amount) or amount <= 0:
      raise ValueError(f'negative sampling amount must be a finite number > 0, got {amount!r}')
    if self.is_triplet() and math.ceil(amount) != amount:
      raise ValueError(f'triplet negative sampling needs a whole amount, got {amount}')
    self.amount = amount
    self.weight = weight

  def count(self, num_edges: int) -> int:
    """The negatives drawn for ``num_edges`` seed edges: pairs (binary) or
    destinations (triplet)."""
    if self.is_binary():
      return math.ceil(num_edges * self.amount)
    return num_edges * int(self.amount)

  def is_binary(self) -> bool:
    return self.mode == NegativeSamplingMode.binary

  def is_triplet(self) -> bool:
    return self.mode == NegativeSamplingMode.triplet

  def share_memory(self) -> 'NegativeSampling':
    if self.weight is not None:
      self.weight.share_memory_()
    return self

  def to(self, device: torch.device) -> 'NegativeSampling':
    if self.weight is not None:
      self.weight = self.weight.to(device)
    return self


@dataclass
class EdgeSamplerInput(CastMixin):
  """Seed edges of a batch.

  Args:
    row: source node ids.
    col: destination node ids.
    label: optional edge labels.
    input_type: the edge type (None for a homogeneous graph).
    neg_sampling: negative sampling settings.
    time: each seed edge's time (temporal sampling: PyG's
      ``edge_label_time``).
  """

  row: torch.Tensor
  col: torch.Tensor
  label: Optional[torch.Tensor] = None
  input_type: Optional[EdgeType] = None
  neg_sampling: Optional[NegativeSampling] = None
  time: Optional[torch.Tensor] = None

  def __getitem__(self, index) -> 'EdgeSamplerInput':
    if not isinstance(index, torch.Tensor):
      index = torch.as_tensor(index, dtype=torch.long)
    return EdgeSamplerInput(
      self.row[index],
      self.col[index],
      self.label[index] if self.label is not None else None,
      self.input_type,
      self.neg_sampling,
      self.time[index] if self.time is not None else None,
    )

  def __len__(self) -> int:
    return self.row.numel()

  def share_memory(self) -> 'EdgeSamplerInput':
    self.row.share_memory_()
    self.col.share_memory_()
    for t in (self.label, self.time):
      if t is not None:
        t.share_memory_()
    if self.neg_sampling is not None:
      self.neg_sampling.share_memory()
    return self

  def to(self, device: torch.device) -> 'EdgeSamplerInput':
    self.row, self.col = self.row.to(device), self.col.to(device)
    if self.label is not None:
      self.label = self.label.to(device)
    if self.time is not None:
      self.time = self.time.to(device)
    if self.neg_sampling is not None:
      self.neg_sampling.to(device)
    return self


class RemoteSamplerInput(ABC):
  """Seeds that a server reads from its own partition (server-client mode),
  so the client need not hold them."""

  @abstractmethod
  def to_local_sampler_input(self, dataset, **kwargs) -> NodeSamplerInput:
    """The seeds, read from the server's ``dataset``."""


class RemoteNodePathSamplerInput(RemoteSamplerInput):
  """Seed nodes in a file on the server (``torch.save`` of an id tensor).

  Args:
    node_path: the file's path on the server.
    input_type: the seeds' node type (None when homogeneous).
  """

  def __init__(self, node_path: str, input_type: Optional[NodeType] = None):
    self.node_path = node_path
    self.input_type = input_type

  def to_local_sampler_input(self, dataset, **kwargs) -> NodeSamplerInput:
    try:
      nodes = torch.load(self.node_path, weights_only=True)
    except FileNotFoundError:
      raise FileNotFoundError(f'no seed file {self.node_path!r} on this server') from None
    return NodeSamplerInput(torch.as_tensor(nodes).view(-1), self.input_type)


_SPLIT_ATTR = {Split.train: 'train_idx', Split.valid: 'val_idx', Split.test: 'test_idx'}


class RemoteNodeSplitSamplerInput(RemoteSamplerInput):
  """A node split of the server's partition as the seeds.

  Args:
    split: 'train', 'valid' or 'test'.
    input_type: the seeds' node type (None when homogeneous).
  """

  def __init__(self, split: Union[Split, str], input_type: Optional[NodeType] = None):
    self.split = Split(split)
    self.input_type = input_type

  def to_local_sampler_input(self, dataset, **kwargs) -> NodeSamplerInput:
    ids = getattr(dataset, _SPLIT_ATTR[self.split])
    if isinstance(ids, dict):
      if self.input_type not in ids:
        raise ValueError(f'the partition has no {self.split.value} split of {self.input_type!r}')
      ids = ids[self.input_type]
    if ids is None:
      raise ValueError(f'the partition has no {self.split.value} split')
    return NodeSamplerInput(torch.as_tensor(ids).view(-1), self.input_type)


@dataclass
class SamplerOutput(CastMixin):
  """A sampled subgraph of a homogeneous graph.

  ``node`` holds the global ids of the sampled nodes (seeds first), and
  ``row``/``col`` the local ids of each sampled edge in message-passing
  order: ``row`` the neighbor, ``col`` the node it was sampled for.

  Args:
    node: global node ids.
    row: local source (neighbor) index per edge.
    col: local destination (seed-side) index per edge.
    edge: global edge ids (with ``with_edge``).
    batch: the seed nodes (GLT's field).
    num_sampled_nodes: nodes added per hop (hop 0: the seeds).
    num_sampled_edges: edges added per hop (None where the edges are not
      hop by hop: induced or bidirectional subgraphs).
    device: where the tensors live.
    metadata: extra outputs (seed positions, link labels, ...).
    seed_index: disjoint sampling: the index of the seed whose subgraph
      holds each node (what PyG's disjoint samplers call ``batch``).
    node_on_host: ``node`` on the host too, where it is on a GPU and the
      sampler had it on the host without waiting for the GPU (a distributed
      batch on a GPU with partitions over RPC: the ids whose feature rows
      peers send); else None.
  """

  node: torch.Tensor
  row: torch.Tensor
  col: torch.Tensor
  edge: Optional[torch.Tensor] = None
  batch: Optional[torch.Tensor] = None
  num_sampled_nodes: Optional[List[int]] = None
  num_sampled_edges: Optional[List[int]] = None
  device: Optional[torch.device] = None
  metadata: Optional[Any] = None
  seed_index: Optional[torch.Tensor] = None
  node_on_host: Optional[torch.Tensor] = None


@dataclass
class HeteroSamplerOutput(CastMixin):
  """A sampled subgraph of a heterogeneous graph: SamplerOutput's fields as
  dicts keyed by node type (node, batch, num_sampled_nodes, seed_index,
  node_on_host) or by the output edge type (row, col, edge,
  num_sampled_edges).

  Args:
    edge_types: the output edge types.
    input_type: the node (or edge) type of the seeds.
  """

  node: Dict[NodeType, torch.Tensor]
  row: Dict[EdgeType, torch.Tensor]
  col: Dict[EdgeType, torch.Tensor]
  edge: Optional[Dict[EdgeType, torch.Tensor]] = None
  batch: Optional[Dict[NodeType, torch.Tensor]] = None
  num_sampled_nodes: Optional[Dict[NodeType, List[int]]] = None
  num_sampled_edges: Optional[Dict[EdgeType, List[int]]] = None
  edge_types: Optional[List[EdgeType]] = None
  input_type: Optional[Union[NodeType, EdgeType]] = None
  device: Optional[torch.device] = None
  metadata: Optional[Any] = None
  seed_index: Optional[Dict[NodeType, torch.Tensor]] = None
  node_on_host: Optional[Dict[NodeType, torch.Tensor]] = None

  def get_edge_index(self) -> Dict[EdgeType, torch.Tensor]:
    return {etype: torch.stack([self.row[etype], self.col[etype]]) for etype in self.row}

  def with_every_type(self) -> 'HeteroSamplerOutput':
    r"""This output with an empty entry for every type of ``edge_types``
    (and their node types) that was not sampled: the layout PyG's models
    need in a batch (``HeteroConv`` and ``to_hetero`` expect every type)."""
    empty = torch.empty(0, dtype=torch.int64, device=self.device)
    etypes = list(self.edge_types or self.row)
    ntypes = list(dict.fromkeys([t for e in etypes for t in (e[0], e[-1])] + list(self.node)))

    def fill(d, keys, empty=empty):
      return None if d is None else {k: d.get(k, empty) for k in keys}

    return HeteroSamplerOutput(
      node=fill(self.node, ntypes),
      row=fill(self.row, etypes),
      col=fill(self.col, etypes),
      edge=fill(self.edge, etypes),
      batch=self.batch,
      num_sampled_nodes=fill(self.num_sampled_nodes, ntypes),
      num_sampled_edges=fill(self.num_sampled_edges, etypes),
      edge_types=etypes,
      input_type=self.input_type,
      device=self.device,
      metadata=self.metadata,
      seed_index=fill(self.seed_index, ntypes),
      node_on_host=fill(self.node_on_host, ntypes, torch.empty(0, dtype=torch.int64)),
    )


@dataclass
class NeighborOutput(CastMixin):
  """One hop of sampling: the neighbors of each seed.

  Args:
    nbr: neighbor ids, seed by seed.
    nbr_num: how many neighbors each seed got.
    edge: the sampled edges' ids (with ``with_edge``).
  """

  nbr: torch.Tensor
  nbr_num: torch.Tensor
  edge: Optional[torch.Tensor] = None

  def to(self, device: torch.device, non_blocking: bool = False) -> 'NeighborOutput':
    r"""The hop on ``device``.

    Args:
      device: where it goes.
      non_blocking: host tensors go to a GPU without the host waiting
        (``to_device_async``: staged in pinned memory torch holds until the
        copy is done); other moves are as ``Tensor.to``'s.
    """
    move = (lambda t: to_device_async(t, device)) if non_blocking else (lambda t: t.to(device))
    return NeighborOutput(
      move(self.nbr), move(self.nbr_num), move(self.edge) if self.edge is not None else None
    )


class SamplingType(Enum):
  NODE = 0
  LINK = 1
  SUBGRAPH = 2
  RANDOM_WALK = 3


@dataclass
class SamplingConfig:
  """Everything a (distributed) sampler needs to know about a loader."""

  sampling_type: SamplingType
  num_neighbors: Optional[NumNeighbors]
  batch_size: int
  shuffle: bool
  drop_last: bool
  with_edge: bool
  collect_features: bool
  with_neg: bool
  with_weight: bool
  edge_dir: str
  seed: Optional[int]
  # Temporal and disjoint sampling (see NeighborSampler).
  time_attr: Optional[str] = None
  temporal_strategy: str = 'uniform'
  disjoint: bool = False
  subgraph_type: str = 'directional'

  def seeded(self) -> 'SamplingConfig':
    """This configuration with a seed: itself when it has one, else a copy
    with one drawn from torch's global generator. A loader's batches are a
    function of its seed (see ``RandomStream.for_batch``)."""
    if self.seed is not None:
      return self
    return dataclasses.replace(self, seed=draw_seed())


class BaseSampler(ABC):
  """A sampler turns seed nodes or edges into a sampled subgraph."""

  @abstractmethod
  def sample_from_nodes(
    self, inputs: NodeSamplerInput, **kwargs
  ) -> Union[HeteroSamplerOutput, SamplerOutput]:
    """Samples the neighborhood of seed nodes."""

  @abstractmethod
  def sample_from_edges(
    self, inputs: EdgeSamplerInput, **kwargs
  ) -> Union[HeteroSamplerOutput, SamplerOutput]:
    """Samples the neighborhood of the endpoints of seed edges."""

  @abstractmethod
  def subgraph(self, inputs: NodeSamplerInput) -> SamplerOutput:
    """Induces the subgraph over seed nodes and their sampled neighbors."""


@dataclass
class HopResult:
  """Every hop of a sampled batch, deduplicated and relabelled.

  Args:
    node: the global ids of the nodes met, per node type (seeds first, then
      each hop's new nodes).
    row: per output edge type, the local index of each edge's neighbor
      (message-passing source).
    col: per output edge type, the local index of the node it was sampled
      for.
    edge: per output edge type, the sampled edges' ids (with ``with_edge``).
    num_sampled_nodes: per node type, the nodes added in each hop (hop 0: the
      seeds).
    num_sampled_edges: per output edge type, the edges added in each hop.
    seed_local: per node type of the seeds, each input seed's local index.
    seed_index: disjoint sampling: per node type, the index of the seed
      whose subgraph holds each node (None otherwise).
    node_on_host: ``node`` on the host too, where the nodes are on a GPU
      and the engine had them on the host without waiting for it (a
      distributed batch on a GPU with partitions over RPC); else None.
  """

  node: Dict[NodeType, torch.Tensor]
  row: Dict[EdgeType, torch.Tensor]
  col: Dict[EdgeType, torch.Tensor]
  edge: Optional[Dict[EdgeType, torch.Tensor]]
  num_sampled_nodes: Dict[NodeType, List[int]]
  num_sampled_edges: Dict[EdgeType, List[int]]
  seed_local: Dict[NodeType, torch.Tensor]
  seed_index: Optional[Dict[NodeType, torch.Tensor]] = None
  node_on_host: Optional[Dict[NodeType, torch.Tensor]] = None

  def to(self, device: torch.device) -> 'HopResult':
    """The same hops with every tensor on ``device``."""

    def moved(tensors):
      return None if tensors is None else {k: v.to(device) for k, v in tensors.items()}

    return HopResult(
      moved(self.node),
      moved(self.row),
      moved(self.col),
      moved(self.edge),
      self.num_sampled_nodes,
      self.num_sampled_edges,
      moved(self.seed_local),
      moved(self.seed_index),
      self.node_on_host,
    )
