"""One hop of the multi-hop engine: what it asks for (``HopRequest``), the
topologies a sampler draws it from itself (``LocalDraws``; a host's
partitions at once: ``HostPartitions``), and what a batch's hops have met so
far (``HopTrace``)."""

from dataclasses import dataclass
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

import torch

from ..data.graph import DeviceTopology
from ..typing import EdgeType, NodeType
from .base import HopResult, NeighborOutput
from .disjoint import DisjointKeys
from .schema import RandomStream, SamplingSchema, mix_seed


class HopRequest(NamedTuple):
  """One draw of a hop: up to ``fanout`` neighbors (-1: all) of each of
  ``seeds`` along edge type ``etype``; in temporal sampling, each seed only
  among the edges (neighbors) of time <= its ``seed_time``. ``host_seeds``:
  the seeds on the host too, where they are on a GPU and the engine has
  them there without a sync (the hop may then be answered with
  ``PieceDraws``)."""

  etype: EdgeType
  seeds: torch.Tensor
  fanout: int
  seed_time: Optional[torch.Tensor] = None
  host_seeds: Optional[torch.Tensor] = None


def hop_counts(counts: List[int], device: torch.device) -> torch.Tensor:
  """Per-hop counts of one type as a tensor that ends at the last hop the
  type appeared in (``[4, 0, 3, 0]`` -> ``[4, 0, 3]``)."""
  end = len(counts)
  while end > 0 and counts[end - 1] == 0:
    end -= 1
  return torch.tensor(counts[:end], dtype=torch.int64, device=device)


def extended(values: torch.Tensor, n: int) -> Tuple[torch.Tensor, torch.Tensor]:
  """``(values followed by room for n more, that room)``.

  A hop's local indices are written into the room in place, so the hops
  need no concatenation at the end; only the earlier hops' are copied, the
  smaller part where hops grow, as they mostly do.
  """
  grown = torch.empty(values.numel() + n, dtype=values.dtype, device=values.device)
  grown[: values.numel()] = values
  return grown, grown[values.numel() :]


def adjacent_views(parts: List[torch.Tensor]) -> Optional[torch.Tensor]:
  """The 1-D tensor ``parts`` make up, without a copy, where each is a
  contiguous 1-D view that starts in one storage where the one before it
  ends (the CPU inducer hands out its nodes hop by hop so); else None."""
  first = parts[0]
  storage = first.untyped_storage()
  start = end = first.storage_offset()
  for part in parts:
    adjacent = (
      part.dim() == 1
      and part.stride(0) == 1
      and part.dtype == first.dtype
      and part.storage_offset() == end
      and part.untyped_storage().data_ptr() == storage.data_ptr()
    )
    if not adjacent:
      return None
    end += part.numel()
  if len(parts) == 1 or end == start:
    return None
  return first.new_empty(0).set_(storage, start, (end - start,))


@dataclass
class HostPartitions:
  """Every partition of a graph, held on the one device that samples (a
  host's partitions, read by its GPU): a batch's hops then draw each seed
  from its partition's topology, in one call for the whole batch, as
  drawing each partition's seeds apart (in seed order, partition ``p`` with
  kernel seed ``partition_seed(k, p)`` for the request's kernel seed ``k``)
  and stitching them does.

  Args:
    topologies: each partition's topology of each edge type (rows for
      every node id; a partition's rows hold the edges of the nodes it owns).
    books: each node type's partition book as a tensor on that device
      (``books[t][id]``: node ``id``'s partition).
    partition_seed: a partition's kernel seed from a request's.
  """

  topologies: List[Dict[EdgeType, DeviceTopology]]
  books: Dict[NodeType, torch.Tensor]
  partition_seed: Callable[[int, int], int] = mix_seed

  @property
  def num_partitions(self) -> int:
    return len(self.topologies)


@dataclass
class LocalDraws:
  """What ``sample_one_hop`` needs to answer every hop from topologies held
  here (on the CPU, or on the GPU that samples); the engine then has its
  inducer draw each hop and relabel the draws in the same call
  (``sample_induce_next``): on the CPU each chunk as soon as it is drawn,
  so that the inducer's sequential inserts overlap the draws; on a GPU every
  hop of a batch in one call, with one host sync (``whole_batch.py``). The
  batches are the ones ``sample_one_hop``'s answers give. With
  ``partitions``, the hops draw from a host's partitions, every hop of a
  batch in one call (an inducer with ``sample_batch``).

  Args:
    topologies: each edge type's topology (``Graph.device_topology()``;
      unused with ``partitions``).
    random: the stream of the kernel seeds, one per request in order.
    with_edge: return the sampled edges' ids.
    with_weight: draw proportionally to the edge weights.
    replace: draw with replacement.
    temporal: the time-sorted topology of each edge type with a time, which
      a request that carries its seeds' times draws from.
    last: temporal requests take the latest allowed neighbors.
    partitions: a host's partitions to draw from rather than
      ``topologies``.
  """

  topologies: Dict[EdgeType, DeviceTopology]
  random: RandomStream
  with_edge: bool = False
  with_weight: bool = False
  replace: bool = False
  temporal: Optional[Dict[EdgeType, DeviceTopology]] = None
  last: bool = False
  partitions: Optional[HostPartitions] = None


@dataclass
class PieceDraws:
  """A hop request's answer that the inducer draws itself, in part (a
  distributed hop on a GPU: the partitions held here drawn and the peers'
  neighbors added in one pass, in seed order, as stitching them would):
  the topologies held here that draw the request's seeds (the first the
  requester's partition, whether it owns a seed or not), their kernel seeds,
  each seed's topology (``part``: int32 on the host; ``len(topologies)``
  for a seed whose neighbors are given), and the neighbors drawn elsewhere
  (``given``: a NeighborOutput in seed order on the host, with none for the
  seeds drawn here; None where every seed is drawn here).

  Args:
    topologies: the topologies held here, on the inducer's device.
    rng_seeds: each topology's kernel seed.
    part: each seed's topology.
    given: the neighbors peers drew, or None.
    with_edge: draw and return edge ids.
    with_weight: draw proportionally to the edge weights.
  """

  topologies: List[DeviceTopology]
  rng_seeds: List[int]
  part: torch.Tensor
  given: Optional[NeighborOutput] = None
  with_edge: bool = False
  with_weight: bool = False


HopAnswer = Callable[[HopRequest], NeighborOutput]
r"""Answers one hop request (a synchronous driver's part)."""


class HopTrace:
  """What the hops of one batch have met so far: each hop's new nodes (on
  the host too, while every hop's were there), and the edges drawn (local
  indices, ids, counts) by output edge type.

  Args:
    schema: the graph's types.
    frontier: the seeds' local nodes by type (the first hop's frontier).
    num_hops: the hops to come.
    empty: an empty id tensor on the sampling device.
    on_host: the frontier on the host too, where the engine has it there.
  """

  def __init__(
    self, schema: SamplingSchema, frontier, num_hops: int, empty: torch.Tensor, on_host=None
  ):
    self.schema = schema
    self.empty = empty
    self.nodes = {t: [f] for t, f in frontier.items()}
    self.host_nodes = None if on_host is None else {t: [on_host[t]] for t in frontier}
    self.num_nodes = {t: [f.numel()] for t, f in frontier.items()}
    out_etypes = [schema.out_edge_type(e) for e in schema.edge_types]
    # Every hop's local indices so far, one tensor per edge type (see extended).
    self.rows = {e: empty for e in out_etypes}
    self.cols = {e: empty for e in out_etypes}
    self.edges = {e: [] for e in out_etypes}
    self.num_edges = {e: [0] * num_hops for e in out_etypes}

  @property
  def edges_so_far(self) -> Tuple[Dict, Dict]:
    """``(rows, cols)``: every hop's local indices so far by output edge
    type, which the hop being added extends."""
    return self.rows, self.cols

  def add(self, hop: int, requests, outs, new_nodes, on_host=None) -> Dict[NodeType, torch.Tensor]:
    """Counts hop ``hop``'s answers and new nodes (``on_host``: the new
    nodes by type on the host too, or None); returns the next frontier
    (the new nodes by type)."""
    for request, out in zip(requests, outs):
      key = self.schema.out_edge_type(request.etype)
      if out.edge is not None:
        self.edges[key].append(out.edge)
      self.num_edges[key][hop] = out.nbr.numel()
    frontier = dict(zip(self.schema.node_types, new_nodes))
    for t, f in frontier.items():
      self.nodes[t].append(f)
      self.num_nodes[t].append(f.numel())
    if on_host is None and any(f.numel() for f in new_nodes):
      self.host_nodes = None
    elif self.host_nodes is not None:
      empty = torch.empty(0, dtype=torch.int64)
      for t in frontier:
        self.host_nodes[t].append(on_host[t] if on_host is not None else empty)
    return frontier

  def _cat(self, parts: List[torch.Tensor]) -> torch.Tensor:
    if not parts:
      return self.empty
    joined = adjacent_views(parts)
    if joined is not None:
      return joined
    # On the CPU, glt's kernel: torch.cat's OpenMP threads spin after it,
    # taking cores from our kernels' threads.
    return torch.ops.glt.concat(parts) if parts[0].is_cpu else torch.cat(parts)

  def result(self, keys: Optional[DisjointKeys], seed_local, with_edge: bool) -> HopResult:
    """The batch's ``HopResult`` (disjoint: ids and seed indices apart)."""
    node = {t: self._cat(v) for t, v in self.nodes.items()}
    seed_index = None
    if keys is not None:
      split_nodes = {t: keys.split(v) for t, v in node.items()}
      node = {t: ids for t, (ids, _) in split_nodes.items()}
      seed_index = {t: index for t, (_, index) in split_nodes.items()}
    return HopResult(
      node=node,
      row=self.rows,
      col=self.cols,
      edge={k: self._cat(v) for k, v in self.edges.items()} if with_edge else None,
      num_sampled_nodes=self.num_nodes,
      num_sampled_edges=self.num_edges,
      seed_local=seed_local,
      seed_index=seed_index,
      node_on_host=(
        {t: torch.cat(v) for t, v in self.host_nodes.items()}
        if self.host_nodes is not None and keys is None
        else None
      ),
    )
