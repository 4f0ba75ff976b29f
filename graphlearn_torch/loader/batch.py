"""A sampled batch by node and edge type, and its PyG form.

Every loader's batch passes through a :class:`SampledBatch` on its way from
the sampler to PyG: local loaders build one from the sampler's output and
gather its features into it; distributed samplers do the same and send it as a
channel message (``distributed.message``), which the trainer decodes back
into one. :func:`to_pyg` then makes the ``Data`` / ``HeteroData``. A
homogeneous batch is the one-type case, under ``HOMO_NODE_TYPE`` and
``HOMO_EDGE_TYPE``.
"""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

import torch
from torch_geometric.data import Data, HeteroData

from ..sampler.base import HeteroSamplerOutput, SamplerOutput
from ..typing import HOMO_EDGE_TYPE, HOMO_NODE_TYPE, EdgeType, NodeType

HopCounts = Union[List[int], torch.Tensor]


@dataclass
class NodeBatch:
  """The nodes of one type in a batch.

  Args:
    ids: their global ids (seeds first).
    batch: the seeds' ids, when the seeds are of this type (GLT's name).
    num_sampled: the nodes added in each hop (hop 0: the seeds).
    x: their features.
    y: their labels.
  """

  ids: torch.Tensor
  batch: Optional[torch.Tensor] = None
  num_sampled: Optional[HopCounts] = None
  x: Optional[torch.Tensor] = None
  y: Optional[torch.Tensor] = None


@dataclass
class EdgeBatch:
  """The edges of one (output) edge type in a batch, in message-passing order.

  Args:
    rows: the local index of each edge's source (the sampled neighbor).
    cols: the local index of its destination.
    eids: the edges' global ids.
    num_sampled: the edges added in each hop.
    attr: their features.
  """

  rows: torch.Tensor
  cols: torch.Tensor
  eids: Optional[torch.Tensor] = None
  num_sampled: Optional[HopCounts] = None
  attr: Optional[torch.Tensor] = None


@dataclass
class SampledBatch:
  """A sampled subgraph with its data, by node and edge type.

  Args:
    hetero: whether it becomes a ``HeteroData`` (else a ``Data``, from the
      one node type ``HOMO_NODE_TYPE`` and edge type ``HOMO_EDGE_TYPE``).
    nodes: the nodes by node type.
    edges: the edges by output edge type.
    metadata: the sampler's extra outputs (seed positions, link labels,
      subgraph mapping).
    input_id: the batch's seed positions among the loader's seeds.
  """

  hetero: bool
  nodes: Dict[NodeType, NodeBatch]
  edges: Dict[EdgeType, EdgeBatch]
  metadata: Dict[str, torch.Tensor] = field(default_factory=dict)
  input_id: Optional[torch.Tensor] = None

  @classmethod
  def from_output(
    cls, out: Union[SamplerOutput, HeteroSamplerOutput], every_type: bool = True
  ) -> 'SampledBatch':
    """The batch of a sampler output, without features yet.

    Args:
      out: the sampler output.
      every_type: a heterogeneous batch holds every type the output names,
        empty where it was not reached (PyG's models need every type);
        False keeps only the types the output holds.
    """
    metadata = out.metadata
    if isinstance(metadata, torch.Tensor):  # a subgraph's bare mapping (GLT)
      metadata = {'mapping': metadata}
    metadata = {k: v for k, v in (metadata or {}).items() if isinstance(v, torch.Tensor)}
    if not isinstance(out, HeteroSamplerOutput):
      return cls(
        hetero=False,
        nodes={HOMO_NODE_TYPE: NodeBatch(out.node, out.batch, out.num_sampled_nodes)},
        edges={HOMO_EDGE_TYPE: EdgeBatch(out.row, out.col, out.edge, out.num_sampled_edges)},
        metadata=metadata,
      )
    if every_type:
      out = out.with_every_type()
    seeds = out.batch or {}
    nodes = {
      t: NodeBatch(ids, seeds.get(t), (out.num_sampled_nodes or {}).get(t))
      for t, ids in out.node.items()
    }
    edges = {
      e: EdgeBatch(
        out.row[e],
        out.col[e],
        out.edge[e] if out.edge is not None else None,
        (out.num_sampled_edges or {}).get(e),
      )
      for e in out.row
    }
    return cls(hetero=True, nodes=nodes, edges=edges, metadata=metadata)


def _as_list(counts: Optional[HopCounts]) -> Optional[List[int]]:
  if counts is None:
    return None
  return counts.tolist() if isinstance(counts, torch.Tensor) else list(counts)


def _padded(counts: Dict, length: int) -> Dict[Union[NodeType, EdgeType], List[int]]:
  """Per-type hop counts as lists of at least ``length`` entries (zeros after
  the last hop a type appeared in), as PyG's per-layer trimming reads them."""
  padded = {}
  for key, value in counts.items():
    value = _as_list(value)
    padded[key] = value + [0] * (length - len(value))
  return padded


def to_pyg(batch: SampledBatch, **kwargs) -> Union[Data, HeteroData]:
  """The PyG ``Data`` (or ``HeteroData``) of a sampled batch.

  Homogeneous batches carry ``x``, ``y``, ``edge_index``, ``n_id`` (and
  GLT's ``node``), ``e_id`` (and ``edge``), ``edge_attr``, ``batch`` (the
  seeds), ``num_sampled_nodes`` and ``num_sampled_edges``; heterogeneous
  ones the same per type, plus GLT's batch-level hop-count dicts.

  Args:
    batch: the batch.
    **kwargs: more attributes of the whole batch.
  """
  if not batch.hetero:
    node, edge = batch.nodes[HOMO_NODE_TYPE], batch.edges[HOMO_EDGE_TYPE]
    data = Data(
      x=node.x,
      edge_index=torch.stack([edge.rows, edge.cols]),
      y=node.y,
      n_id=node.ids,
      num_sampled_nodes=_as_list(node.num_sampled),
      num_sampled_edges=_as_list(edge.num_sampled),
      **kwargs,
    )
    data.num_nodes = node.ids.numel()
    data.node = data.n_id  # GLT's name, the same tensor
    if edge.attr is not None:
      data.edge_attr = edge.attr
    if edge.eids is not None:
      data.e_id = edge.eids
      data.edge = data.e_id
    if node.batch is not None:
      data.batch = node.batch
    return data

  data = HeteroData(**kwargs)
  edge_counts = _padded(
    {e: b.num_sampled for e, b in batch.edges.items() if b.num_sampled is not None}, 0
  )
  num_hops = max((len(c) for c in edge_counts.values()), default=0)
  node_counts = _padded(
    {t: b.num_sampled for t, b in batch.nodes.items() if b.num_sampled is not None}, num_hops + 1
  )
  edge_counts = _padded(edge_counts, num_hops)
  for ntype, node in batch.nodes.items():
    store = data[ntype]
    store.n_id = node.ids
    store.node = node.ids  # GLT's name, the same tensor
    store.num_nodes = node.ids.numel()
    if ntype in node_counts:
      store.num_sampled_nodes = node_counts[ntype]
    if node.x is not None:
      store.x = node.x
    if node.y is not None:
      store.y = node.y
  for ntype, node in batch.nodes.items():
    if node.batch is not None:
      data[ntype].batch = node.batch
      data[ntype].batch_size = node.batch.numel()
  for etype, edge in batch.edges.items():
    store = data[etype]
    store.edge_index = torch.stack([edge.rows, edge.cols])
    if edge.eids is not None:
      store.e_id = edge.eids
      store.edge = store.e_id
    if etype in edge_counts:
      store.num_sampled_edges = edge_counts[etype]
    if edge.attr is not None:
      store.edge_attr = edge.attr
  # GLT's batch-level dicts beside PyG's per-type attributes.
  data.num_sampled_nodes = {t: torch.tensor(c) for t, c in node_counts.items()}
  data.num_sampled_edges = {e: torch.tensor(c) for e, c in edge_counts.items()}
  return data
