"""PyG's subgraph types of a sampled batch: 'directional' (the sampled edges,
in message-passing order), 'bidirectional' (every sampled edge both ways,
PyG's ``to_bidirectional``) and 'induced' (every edge of the graph between
two sampled nodes)."""

import dataclasses
from typing import Dict, Union

import torch
import torch_geometric.sampler as pyg

from ..data.graph import Graph
from ..typing import EdgeType
from .base import HeteroSamplerOutput, HopResult, SamplerOutput
from .schema import SamplingSchema

SUBGRAPH_TYPES = ('directional', 'bidirectional', 'induced')


def bidirectional(
  out: Union[SamplerOutput, HeteroSamplerOutput],
) -> Union[SamplerOutput, HeteroSamplerOutput]:
  """The output with every sampled edge in both directions, deduplicated:
  PyG's ``to_bidirectional`` (its code, on PyG's output class), so the edges
  are PyG's. Hop counts of edges and nodes are dropped, as PyG drops them.

  Args:
    out: a directional sampler output.
  """
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


def _entries_of(indptr: torch.Tensor, rows: torch.Tensor):
  """``(positions, row index)``: every stored entry of ``rows`` (ids
  within the topology's rows), row by row, and the index in ``rows`` of the
  row each belongs to."""
  start = indptr[rows]
  degree = indptr[rows + 1] - start
  owner = torch.arange(rows.numel(), device=rows.device).repeat_interleave(degree)
  first = (degree.cumsum(0) - degree).repeat_interleave(degree)
  positions = torch.arange(owner.numel(), device=rows.device) - first + start[owner]
  return positions, owner


def _local_ids(nodes: torch.Tensor, ids: torch.Tensor):
  """``(found, local)``: which ``ids`` are among ``nodes`` (unique), and
  the position in ``nodes`` of each found one."""
  ordered, order = torch.sort(nodes)
  at = torch.searchsorted(ordered, ids).clamp(max=max(nodes.numel() - 1, 0))
  found = ordered[at] == ids if nodes.numel() else torch.zeros_like(ids, dtype=torch.bool)
  return found, order[at[found]]


def induced_edges(
  res: HopResult, schema: SamplingSchema, graphs: Dict[EdgeType, Graph], with_edge: bool
) -> HopResult:
  """The sampled nodes of ``res`` with every edge of ``graphs`` between two
  of them (PyG's ``subgraph_type='induced'``), row by row of the seed-side
  nodes in their order, in message-passing order (row: the neighbor side).
  Edge hop counts are dropped (the edges are not drawn hop by hop).

  Args:
    res: the sampled hops (not disjoint).
    schema: the sampler's schema.
    graphs: each edge type's graph.
    with_edge: return the edges' ids.
  """
  rows, cols, edges = {}, {}, {}
  for etype, g in graphs.items():
    key = schema.out_edge_type(etype)
    topo = g.topo
    seeds = res.node[schema.seed_type(etype)].cpu()
    nbrs = res.node[schema.nbr_type(etype)].cpu()
    seeds_here = seeds < topo.row_count
    positions, owner = _entries_of(topo.indptr.long(), seeds[seeds_here])
    owner = seeds_here.nonzero().view(-1)[owner]
    found, nbr_local = _local_ids(nbrs, topo.indices[positions].long())
    device = res.node[schema.seed_type(etype)].device
    rows[key] = nbr_local.to(device)
    cols[key] = owner[found].to(device)
    if with_edge:
      edges[key] = topo.edge_ids[positions[found]].to(device)
  return dataclasses.replace(
    res, row=rows, col=cols, edge=edges if with_edge else None, num_sampled_edges=None
  )
