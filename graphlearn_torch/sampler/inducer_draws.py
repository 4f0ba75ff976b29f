"""Hops the inducer draws itself as it adds them (``sample_induce_next``):
from topologies held here (``LocalDraws``), or from the partitions a host
holds with the neighbors peers drew for the other seeds (``PieceDraws``).
The multi-hop engine's steps for them, apart from its hop loop."""

from typing import Dict, List, Tuple

import torch

from ..utils.device import to_device_async
from .base import NeighborOutput
from .hops import HopRequest, LocalDraws, PieceDraws
from .schema import SamplingSchema

Extended = Dict[object, torch.Tensor]
r"""Every hop's local indices so far, one tensor per output edge type (the
engine's rows and cols, extended in place)."""


def distinct_in_order(ids: torch.Tensor) -> torch.Tensor:
  r"""``ids`` (on the host) without repeats, each where it first appears:
  the seeds an inducer's ``init_nodes`` keeps, in its order."""
  if ids.numel() == 0:
    return ids.clone()
  unique, inverse = torch.unique(ids, return_inverse=True)
  positions = torch.arange(ids.numel())
  first = torch.full((unique.numel(),), ids.numel()).scatter_reduce_(0, inverse, positions, 'amin')
  return ids[first.sort().values]


def _types(schema: SamplingSchema, requests: List[HopRequest]) -> Dict[str, List[int]]:
  return dict(
    src_types=[schema.type_index[schema.seed_type(r.etype)] for r in requests],
    nbr_types=[schema.type_index[schema.nbr_type(r.etype)] for r in requests],
  )


def _outputs(keys, rows: Extended, cols: Extended, drawn, with_edge: List[bool]):
  r"""Extends ``rows`` and ``cols`` with a drawn hop's local indices;
  returns its answers (``NeighborOutput`` s) and its new nodes."""
  new_nodes, seed_locals, nbr_locals, nbrs, nbr_nums, edges = drawn[:6]
  for key, seed_local, nbr_local in zip(keys, seed_locals, nbr_locals):
    cols[key], rows[key] = seed_local, nbr_local
  outs = [
    NeighborOutput(nbr, num, edge if edged else None)
    for nbr, num, edge, edged in zip(nbrs, nbr_nums, edges, with_edge)
  ]
  return outs, new_nodes


def draw_and_induce(
  schema: SamplingSchema, inducer, requests, srcs, local: LocalDraws, rows, cols
) -> Tuple[List[NeighborOutput], List[torch.Tensor]]:
  r"""Draws a hop's requests from ``local`` and adds them to ``inducer``
  in one pass (``Inducer.sample_induce_next``), as the engine does with
  ``sample_one_hop``'s answers (``srcs``: the requests' seeds as the
  inducer keys them); extends ``rows`` and ``cols``. Returns the answers
  and the nodes new to each type."""
  keys = [schema.out_edge_type(r.etype) for r in requests]
  temporal = local.temporal or {}
  timed = [r.seed_time is not None and r.etype in temporal for r in requests]
  topos = [temporal[r.etype] if t else local.topologies[r.etype] for r, t in zip(requests, timed)]
  drawn = inducer.sample_induce_next(
    **_types(schema, requests),
    srcs=srcs,
    indptrs=[t.indptr for t in topos],
    indices=[t.indices for t in topos],
    edge_ids=[t.edge_ids if local.with_edge else None for t in topos],
    edge_weights=[t.edge_weights if local.with_weight else None for t in topos],
    fanouts=[int(r.fanout) for r in requests],
    replace=local.replace,
    rng_seeds=local.random.kernel_seeds(len(requests)),
    row_prefixes=[cols[k] for k in keys],
    col_prefixes=[rows[k] for k in keys],
    edge_times=[t.edge_time if on else None for t, on in zip(topos, timed)],
    seed_times=[r.seed_time if on else None for r, on in zip(requests, timed)],
    last=local.last,
    row_max_times=[t.row_max_time if on else None for t, on in zip(topos, timed)],
  )
  return _outputs(keys, rows, cols, drawn, [local.with_edge] * len(requests))


def _pieces(answer: PieceDraws, device: torch.device) -> dict:
  r"""``sample_induce_next``'s pieces of one request: the topologies after
  the first, and the given neighbors as a topology of a row a seed (in the
  first's index dtype), moved to ``device`` without a sync."""
  more = answer.topologies[1:]
  dtype = answer.topologies[0].indptr.dtype
  pieces = dict(
    indptrs=[t.indptr for t in more],
    indices=[t.indices for t in more],
    edge_ids=[t.edge_ids if answer.with_edge else None for t in more],
    edge_weights=[t.edge_weights if answer.with_weight else None for t in more],
    rng_seeds=list(answer.rng_seeds[1:]),
    part=to_device_async(answer.part, device),
    given=answer.given is not None,
  )
  if answer.given is not None:
    given = answer.given
    indptr = torch.zeros(given.nbr_num.numel() + 1, dtype=torch.int64)
    torch.cumsum(given.nbr_num, 0, out=indptr[1:])
    pieces['indptrs'].append(to_device_async(indptr.to(dtype), device))
    pieces['indices'].append(to_device_async(given.nbr.to(dtype), device))
    edge = to_device_async(given.edge, device) if answer.with_edge else None
    pieces['edge_ids'].append(edge)
    pieces['edge_weights'].append(None)
    pieces['rng_seeds'].append(0)  # (its rows are taken whole)
  return pieces


def pieces_and_induce(
  schema: SamplingSchema,
  inducer,
  requests: List[HopRequest],
  srcs: List[torch.Tensor],
  answers: List[PieceDraws],
  rows: Extended,
  cols: Extended,
) -> Tuple[List[NeighborOutput], List[torch.Tensor], Dict[object, torch.Tensor]]:
  r"""Draws a hop answered with ``PieceDraws`` and adds it to ``inducer``
  in one pass, with the hop's one host sync; extends ``rows`` and
  ``cols``. Returns the answers, the nodes new to each type on the
  inducer's device, and the same by node type on the host (copied there
  with the hop's sizes): the next hop's seeds, which a distributed hop
  groups there, and the ids the batch's feature rows are asked by."""
  if not all(isinstance(a, PieceDraws) for a in answers):
    raise ValueError("a hop's answers are PieceDraws all or none")
  keys = [schema.out_edge_type(r.etype) for r in requests]
  device = srcs[0].device
  own = [a.topologies[0] for a in answers]
  drawn = inducer.sample_induce_next(
    **_types(schema, requests),
    srcs=srcs,
    indptrs=[t.indptr for t in own],
    indices=[t.indices for t in own],
    edge_ids=[t.edge_ids if a.with_edge else None for t, a in zip(own, answers)],
    edge_weights=[t.edge_weights if a.with_weight else None for t, a in zip(own, answers)],
    fanouts=[int(r.fanout) for r in requests],
    replace=False,
    rng_seeds=[a.rng_seeds[0] for a in answers],
    row_prefixes=[cols[k] for k in keys],
    col_prefixes=[rows[k] for k in keys],
    pieces=[_pieces(a, device) for a in answers],
    fresh_on_host=True,
  )
  outs, new_nodes = _outputs(keys, rows, cols, drawn, [a.with_edge for a in answers])
  return outs, new_nodes, dict(zip(schema.node_types, drawn[6]))
