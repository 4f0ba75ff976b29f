"""A sampled batch by node and edge type.

Every loader's batch passes through a :class:`SampledBatch` on its way from
the sampler to PyG: local loaders build one from the sampler's output and
gather its features into it (``batch.features``); distributed samplers do
the same and send it as a channel message (``batch.codec``), which the
trainer decodes back into one. ``batch.pyg.to_pyg`` then makes the ``Data``
/ ``HeteroData``. A homogeneous batch is the one-type case, under
``HOMO_NODE_TYPE`` and ``HOMO_EDGE_TYPE``.
"""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

import torch

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
    seed_index: disjoint sampling: the seed whose subgraph holds each node
      (PyG's ``batch``).
    host_ids: ``ids`` on the host too, where they are on a GPU and the
      sampler had them on the host (what peers are asked for feature rows
      by, without waiting for the GPU); never encoded into a message.
  """

  ids: torch.Tensor
  batch: Optional[torch.Tensor] = None
  num_sampled: Optional[HopCounts] = None
  x: Optional[torch.Tensor] = None
  y: Optional[torch.Tensor] = None
  seed_index: Optional[torch.Tensor] = None
  host_ids: Optional[torch.Tensor] = field(default=None, metadata={'encoded': False})


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

  def edge_index(self) -> torch.Tensor:
    r"""``[rows; cols]``, ``[2, num_edges]``: a view where they are the two
    rows of one tensor (a batch decoded from a shared-memory channel), else
    a copy."""
    rows, cols = self.rows, self.cols
    n = rows.numel()
    adjacent = (
      rows.dim() == cols.dim() == 1
      and rows.dtype == cols.dtype
      and rows.device == cols.device
      and cols.numel() == n
      and rows.is_contiguous()
      and cols.is_contiguous()
      and rows.untyped_storage().data_ptr() == cols.untyped_storage().data_ptr()
      and cols.data_ptr() == rows.data_ptr() + n * rows.element_size()
    )
    return rows.as_strided((2, n), (n, 1)) if adjacent else torch.stack([rows, cols])


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
        nodes={
          HOMO_NODE_TYPE: NodeBatch(
            out.node,
            out.batch,
            out.num_sampled_nodes,
            seed_index=out.seed_index,
            host_ids=out.node_on_host,
          )
        },
        edges={HOMO_EDGE_TYPE: EdgeBatch(out.row, out.col, out.edge, out.num_sampled_edges)},
        metadata=metadata,
      )
    if every_type:
      out = out.with_every_type()
    seeds = out.batch or {}
    seed_index = out.seed_index or {}
    on_host = out.node_on_host or {}
    nodes = {
      t: NodeBatch(
        ids,
        seeds.get(t),
        (out.num_sampled_nodes or {}).get(t),
        seed_index=seed_index.get(t),
        host_ids=on_host.get(t),
      )
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
