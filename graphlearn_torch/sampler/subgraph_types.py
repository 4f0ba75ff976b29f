"""PyG's subgraph types of a sampled batch: 'directional' (the sampled edges,
in message-passing order), 'bidirectional' (every sampled edge both ways,
PyG's ``to_bidirectional``) and 'induced' (every edge of the graph between
two sampled nodes)."""

import dataclasses
from typing import Dict, Union

import torch

from ..typing import EdgeType
from .base import HeteroSamplerOutput, HopResult, NeighborOutput, SamplerOutput
from .schema import SamplingSchema

SUBGRAPH_TYPES = ('directional', 'bidirectional', 'induced')


def checked_subgraph_type(subgraph_type, disjoint: bool) -> str:
  """A sampler's subgraph type as a string (PyG's ``SubgraphType`` or its
  value), checked.

  Args:
    subgraph_type: 'directional', 'bidirectional' or 'induced'.
    disjoint: whether the sampler is disjoint (or temporal).

  Raises:
    ValueError: an unknown type, or 'induced' with disjoint sampling (as
      in PyG).
  """
  name = str(getattr(subgraph_type, 'value', subgraph_type))
  if name not in SUBGRAPH_TYPES:
    raise ValueError(f'subgraph_type must be one of {SUBGRAPH_TYPES}, got {subgraph_type!r}')
  if name == 'induced' and disjoint:
    raise ValueError("subgraph_type='induced' cannot be disjoint (nor temporal), as in PyG")
  return name


def bidirectional(
  out: Union[SamplerOutput, HeteroSamplerOutput],
) -> Union[SamplerOutput, HeteroSamplerOutput]:
  """The output with every sampled edge in both directions, deduplicated:
  PyG's ``to_bidirectional`` (its code, on PyG's output class), so the edges
  are PyG's. Hop counts of edges and nodes are dropped, as PyG drops them.

  Args:
    out: a directional sampler output.
  """
  import torch_geometric.sampler as pyg

  if isinstance(out, HeteroSamplerOutput):
    theirs = pyg.HeteroSamplerOutput(out.node, out.row, out.col, out.edge).to_bidirectional()
  else:
    theirs = pyg.SamplerOutput(out.node, out.row, out.col, out.edge).to_bidirectional()
  return dataclasses.replace(
    out,
    row=theirs.row,
    col=theirs.col,
    edge=theirs.edge,
    num_sampled_nodes=None,
    num_sampled_edges=None,
  )


def _local_ids(nodes: torch.Tensor, ids: torch.Tensor):
  """``(found, local)``: which ``ids`` are among ``nodes`` (unique), and
  the position in ``nodes`` of each found one."""
  ordered, order = torch.sort(nodes)
  at = torch.searchsorted(ordered, ids).clamp(max=max(nodes.numel() - 1, 0))
  found = ordered[at] == ids if nodes.numel() else torch.zeros_like(ids, dtype=torch.bool)
  return found, order[at[found]]


def induced_edges(
  res: HopResult,
  schema: SamplingSchema,
  neighbors: Dict[EdgeType, NeighborOutput],
  with_edge: bool,
) -> HopResult:
  """The sampled nodes of ``res`` with every edge of the graph between two
  of them (PyG's ``subgraph_type='induced'``), row by row of the seed-side
  nodes in their order, in message-passing order (row: the neighbor side).
  Edge hop counts are dropped (the edges are not drawn hop by hop).

  Args:
    res: the sampled hops (not disjoint).
    schema: the sampler's schema.
    neighbors: per edge type, every neighbor (fanout -1, in stored order)
      of each of the sampled nodes of its seed side
      (``res.node[schema.seed_type(etype)]``), wherever they were drawn.
    with_edge: return the edges' ids.
  """
  rows, cols, edges = {}, {}, {}
  for etype, out in neighbors.items():
    key = schema.out_edge_type(etype)
    device = res.node[schema.seed_type(etype)].device
    nbr, nbr_num = out.nbr.cpu(), out.nbr_num.cpu()
    owner = torch.arange(nbr_num.numel()).repeat_interleave(nbr_num)
    found, nbr_local = _local_ids(res.node[schema.nbr_type(etype)].cpu(), nbr)
    rows[key] = nbr_local.to(device)
    cols[key] = owner[found].to(device)
    if with_edge:
      edges[key] = out.edge.cpu()[found].to(device)
  return dataclasses.replace(
    res, row=rows, col=cols, edge=edges if with_edge else None, num_sampled_edges=None
  )
