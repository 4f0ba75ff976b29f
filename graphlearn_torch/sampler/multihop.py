"""The multi-hop sampling engine that every neighbor sampler drives.

A neighbor sampler is two things: a way to answer one hop (draw up to k
neighbors of some seeds along one edge type) and everything around it: seed
checks, which hops to ask for, deduplication and relabelling of the nodes met
(the inducer), the random stream, and the output. This module is the second
part. ``NeighborSampler`` drives it with hops answered from its own
topologies; ``DistNeighborSampler`` with hops answered by whichever partition
owns each seed. A homogeneous graph is the one-type case of a heterogeneous
one, with the types ``HOMO_NODE_TYPE`` and ``HOMO_EDGE_TYPE``.

Driving the engine::

    engine = MultiHopSampler(schema, num_neighbors)
    steps = engine.sample_steps({node_type: seeds})
    requests = next(steps)                  # this hop's HopRequests
    while True:                             # until StopIteration(HopResult)
      requests = steps.send([answer(r) for r in requests])

``MultiHopSampler.sample`` does exactly that for an answer that returns at
once. A new sampler (another device, another storage) plugs in by answering
``HopRequest`` s with ``NeighborOutput`` s. A sampler whose topologies are
on this machine (its CPU, or the GPU it samples on) also passes them as
``LocalDraws``: the inducer then draws each hop itself, relabelling the
draws while they are drawn (on a GPU, telling the host the hop's sizes once),
with the batches the answers would give.
"""

import contextlib
import functools
import heapq
import itertools
import threading
from typing import Callable, Dict, Generator, Iterator, List, Optional, Tuple, Union

import torch

from .._ext import ops
from ..typing import (
  HOMO_EDGE_TYPE,
  HOMO_NODE_TYPE,
  NodeType,
  NumNeighbors,
)
from ..utils.device import on_device, to_device_async
from .base import (
  HeteroSamplerOutput,
  HopResult,
  NeighborOutput,
  NodeSamplerInput,
  SamplerOutput,
)
from .disjoint import DisjointKeys
from .hops import HopAnswer, HopRequest, HopTrace, LocalDraws, PieceDraws, extended, hop_counts
from .inducer_draws import distinct_in_order, draw_and_induce, pieces_and_induce
from .link import LinkSampling
from .one_hop import sample_one_hop  # noqa: F401  (its home before one_hop.py)
from .schema import RandomStream, SamplingSchema
from .whole_batch import LaunchedBatch, WholeBatchPlans, draws_whole_batch, sample_whole_batch

# Node types up to this size get an id-indexed inducer map (4 bytes a node
# for each batch in flight). Past it a map outgrows the caches and is no
# faster than a hash table sized to the batch (fanout [15, 10, 5], 1024
# seeds, 1 thread, 2-core EPYC: 0.77x at 2.4 M nodes, 0.95-1.03x at 8 M,
# 0.91-1.02x at 24 M).
DENSE_INDUCER_MAX_NODES = 1 << 23
# What the id-indexed maps of one sampler's inducers take together at most
# by default (dense_map_budget: a distributed sampler's share of its host's).
# Each batch in flight holds an inducer of its own: without a budget, a
# sampling process would grow with the graph times its batches in flight.
# Past it an inducer hashes: its table grows with the batch only.
DENSE_INDUCER_BUDGET_BYTES = 4 << 26


class MultiHopSampler(LinkSampling):
  """The hop loop and its bookkeeping, for any way of answering one hop.

  Args:
    schema: the graph's types and sizes.
    num_neighbors: neighbors per hop (-1: all); a dict of lists by edge type
      for a heterogeneous graph (0 skips an edge type in a hop). None for a
      sampler that only answers single hops.
    with_edge: the answers carry edge ids, and outputs return them.
    random: the random stream of link sampling's weighted negatives (default:
      torch's global generator).
    device: where outputs go.
    sample_device: where the hops and the inducer run (the graph's device:
      the CPU, or the GPU of a 'CUDA' or 'ZERO_COPY' graph).
    disjoint: every seed grows a subgraph of its own (``DisjointKeys``);
      outputs carry each node's seed in ``seed_index``.
    dense_map_budget: bytes the id-indexed inducer maps of the engine's
      batches in flight take at most together (CPU); past it they hash.
  """

  def __init__(
    self,
    schema: SamplingSchema,
    num_neighbors: Optional[NumNeighbors] = None,
    with_edge: bool = False,
    random: Optional[RandomStream] = None,
    device: torch.device = torch.device('cpu'),
    sample_device: torch.device = torch.device('cpu'),
    disjoint: bool = False,
    dense_map_budget: int = DENSE_INDUCER_BUDGET_BYTES,
  ):
    self.schema = schema
    self.num_neighbors = num_neighbors
    self.fanouts = schema.normalize_fanouts(num_neighbors) if num_neighbors is not None else None
    self.with_edge = with_edge
    self.random = random if random is not None else RandomStream()
    self.device = device
    self.sample_device = torch.device(sample_device)
    self.disjoint = disjoint
    self.dense_map_budget = dense_map_budget
    self._start_inducer_pool()

  def _start_inducer_pool(self) -> None:
    # Idle inducers, those with the most bytes of id-indexed maps first:
    # (-bytes, order made, inducer, bytes).
    self._idle_inducers: List[tuple] = []
    self._inducer_order = itertools.count()
    self._dense_bytes = 0  # of the pool's id-indexed maps
    self._pool_lock = threading.RLock()
    # and the inducers' plan of whole batches (made with the first inducer)
    self._whole_plans = WholeBatchPlans(
      self.schema, self.fanouts, self.num_hops, self.sample_device
    )

  _POOL = ('_idle_inducers', '_inducer_order', '_dense_bytes', '_pool_lock', '_whole_plans')

  def __getstate__(self):
    # The inducer pool is this process's cache of native maps and plans: a
    # copy (a spawned data loader worker's) starts with an empty one.
    state = dict(self.__dict__)
    for name in self._POOL:
      del state[name]
    return state

  def __setstate__(self, state):
    self.__dict__.update(state)
    self._start_inducer_pool()

  @property
  def num_hops(self) -> int:
    return len(next(iter(self.fanouts.values()))) if self.fanouts else 0

  # -- inducers ---------------------------------------------------------------

  def create_inducer(self):
    """A new inducer on the sampling device: one id space per node type; on
    the CPU an id-indexed map (4 bytes a node) where that stays small and the
    engine's maps stay within ``dense_map_budget``, else a hash
    table (always for disjoint sampling's keys, each seed's in a region of
    its own); on a GPU hash tables (``CudaInducer``)."""
    bits = DisjointKeys.bits_of(self.schema) if self.disjoint else 0
    if self.sample_device.type == 'cuda':
      return ops.CudaInducer(len(self.schema.node_types), self.sample_device.index, bits)
    sizes = [self.schema.num_nodes[t] for t in self.schema.node_types]
    if self.disjoint:
      return ops.Inducer(len(sizes), [], bits)
    return ops.Inducer(len(sizes), self._dense_sizes(sizes))

  def _dense_sizes(self, sizes: List[int]) -> List[int]:
    """Each node type's id-indexed map size (0: a hash table) for a new
    inducer, charged to the engine's budget."""
    dense = []
    with self._pool_lock:
      for n in sizes:
        fits = n <= DENSE_INDUCER_MAX_NODES
        fits = fits and self._dense_bytes + 4 * n <= self.dense_map_budget
        self._dense_bytes += 4 * n if fits else 0
        dense.append(n if fits else 0)
    return dense

  @contextlib.contextmanager
  def inducer(self) -> Iterator:
    """An inducer for one batch, from the engine's pool (made on demand and
    kept for reuse: batches in flight at once each get their own; those with
    id-indexed maps are taken first)."""
    inducer, give_back = self._take_inducer()
    try:
      yield inducer
    finally:
      give_back()

  def _take_inducer(self) -> Tuple[object, Callable[[], None]]:
    """``(an inducer from the pool, what hands it back)``: see ``inducer``."""
    with self._pool_lock:
      if self._idle_inducers:
        *_, inducer, dense_bytes = heapq.heappop(self._idle_inducers)
      else:
        before = self._dense_bytes
        inducer = self.create_inducer()
        dense_bytes = self._dense_bytes - before

    def give_back() -> None:
      idle = (-dense_bytes, next(self._inducer_order), inducer, dense_bytes)
      with self._pool_lock:
        heapq.heappush(self._idle_inducers, idle)

    return inducer, give_back

  def launch(
    self, seed_dict: Dict[NodeType, torch.Tensor], local: LocalDraws
  ) -> Optional[LaunchedBatch]:
    """Launches a batch drawn whole from ``local`` where an inducer of the
    pool can start it without waiting for it (``launch_batch``: on a GPU,
    outside disjoint and temporal sampling, every fanout bounded): the
    launched batch holds its inducer until it is finished or discarded.
    None where the batch cannot be launched so (``sample_steps`` then
    samples it).

    Args:
      seed_dict: checked seed ids by node type.
      local: the topologies to draw from.
    """
    if self.fanouts is None or self.disjoint:
      return None
    inducer, give_back = self._take_inducer()
    if not (hasattr(inducer, 'launch_batch') and draws_whole_batch(inducer, self.fanouts, local)):
      give_back()
      return None
    try:
      batch = self._whole_plans.get(inducer, local).batch(seed_dict, local.random)
    except BaseException:
      give_back()
      raise
    return LaunchedBatch(batch, inducer, give_back)

  # -- the hop loop -----------------------------------------------------------

  def sample_steps(
    self,
    seed_dict: Dict[NodeType, torch.Tensor],
    inducer=None,
    local: Optional[LocalDraws] = None,
    seed_time: Optional[Dict[NodeType, torch.Tensor]] = None,
  ) -> Generator[List[HopRequest], List[NeighborOutput], HopResult]:
    """Multi-hop sampling with the one-hop draws left to the caller.

    Yields, once per hop, the hop's requests and takes back their
    NeighborOutputs (or ``PieceDraws``, which the inducer draws) in the same
    order; returns the deduplicated and relabelled result. With ``local``,
    the inducer draws every hop itself and nothing is yielded (where every
    fanout has a bound, outside disjoint and temporal sampling, every hop in
    one call: whole_batch.py). ``inducer`` (default: one from
    the pool, returned when the generator ends or is closed) must not be
    shared by two unfinished runs.

    Args:
      seed_dict: checked seed ids by node type (on a GPU engine's host,
        they are deduplicated there and the requests carry ``host_seeds``).
      inducer: the inducer to use.
      local: the topologies to draw from here; a host's partitions only
        where the whole batch is drawn at once.
      seed_time: the seeds' times by node type (temporal sampling, which is
        disjoint): every request then carries its seeds' times.
    """
    if self.fanouts is None:
      raise ValueError('the sampler has no num_neighbors')
    if seed_time is not None and not self.disjoint:
      raise ValueError('temporal sampling is disjoint: the engine needs disjoint=True')
    if inducer is None:
      with self.inducer() as pooled:
        return (yield from self.sample_steps(seed_dict, pooled, local, seed_time))
    if seed_time is None and not self.disjoint and draws_whole_batch(inducer, self.fanouts, local):
      plan = self._whole_plans.get(inducer, local)
      return sample_whole_batch(plan, inducer, seed_dict, local.random)
    if local is not None and local.partitions is not None:
      raise ValueError(
        "a host's partitions are drawn a whole batch at once: not disjoint, no times, "
        'every fanout >= 0 and an inducer with sample_batch'
      )
    schema = self.schema
    keys = DisjointKeys(schema, seed_dict, seed_time) if self.disjoint else None
    if keys is not None:
      seed_dict = keys.seed_keys
    empty = torch.empty(0, dtype=torch.int64, device=self.sample_device)
    frontier, seed_local, on_host = self._first_frontier(inducer, seed_dict, keys is not None)
    trace = HopTrace(schema, frontier, self.num_hops, empty, on_host)
    for hop in range(self.num_hops):
      requests, srcs = self._hop_requests(frontier, hop, keys, on_host)
      on_host = None
      if local is not None:
        outs, new_nodes = draw_and_induce(
          schema, inducer, requests, srcs, local, *trace.edges_so_far
        )
      else:
        outs = (yield requests) if requests else []
        if len(outs) != len(requests):
          raise ValueError(f'{len(requests)} hop requests got {len(outs)} answers')
        if outs and isinstance(outs[0], PieceDraws):
          outs, new_nodes, on_host = pieces_and_induce(
            schema, inducer, requests, srcs, outs, *trace.edges_so_far
          )
        else:
          nbrs = [out.nbr for out in outs]
          if keys is not None:
            nbrs = [keys.neighbor_keys(f, out.nbr, out.nbr_num) for f, out in zip(srcs, outs)]
          new_nodes = self._induce(inducer, requests, srcs, nbrs, outs, *trace.edges_so_far)
      frontier = trace.add(hop, requests, outs, new_nodes, on_host)
    return trace.result(keys, seed_local, self.with_edge)

  def _first_frontier(self, inducer, seed_dict, distinct: bool):
    """``(frontier, each seed's local index, the frontier on the host or
    None)``: the seeds added to ``inducer``. Seeds given on the host to an
    engine on a GPU are deduplicated there and added without a sync, and
    the hops know their seeds there (``HopRequest.host_seeds``)."""
    schema, device = self.schema, self.sample_device
    empty = torch.empty(0, dtype=torch.int64)
    on_host = None
    if device.type == 'cuda' and not distinct and all(s.is_cpu for s in seed_dict.values()):
      on_host = {t: distinct_in_order(seed_dict.get(t, empty)) for t in schema.node_types}
      seed_dict = {t: to_device_async(s, device) for t, s in seed_dict.items()}
      seeds, distinct = [to_device_async(on_host[t], device) for t in schema.node_types], True
    else:
      seeds = [seed_dict.get(t, empty.to(device)) for t in schema.node_types]
    frontier = dict(zip(schema.node_types, inducer.init_nodes(seeds, distinct=distinct)))
    seed_local = {t: inducer.local_ids(schema.type_index[t], s) for t, s in seed_dict.items()}
    return frontier, seed_local, on_host

  def _hop_requests(
    self,
    frontier: Dict[NodeType, torch.Tensor],
    hop: int,
    keys: Optional[DisjointKeys],
    on_host: Optional[Dict[NodeType, torch.Tensor]] = None,
  ) -> Tuple[List[HopRequest], List[torch.Tensor]]:
    """Hop ``hop``'s requests from the nodes ``frontier`` met last (also
    ``on_host``, where given), and each request's seeds as the inducer keys
    them (disjoint sampling's keys)."""
    schema = self.schema
    asked = [
      (etype, frontier[schema.seed_type(etype)], fanout[hop])
      for etype, fanout in self.fanouts.items()
      if fanout[hop] != 0 and frontier[schema.seed_type(etype)].numel() > 0
    ]
    if keys is None:
      host = on_host or {}
      requests = [
        HopRequest(etype, f, fanout, None, host.get(schema.seed_type(etype)))
        for etype, f, fanout in asked
      ]
    else:
      split = [keys.split(f) for _, f, _ in asked]
      requests = [
        HopRequest(etype, ids, fanout, keys.seed_time(index))
        for (etype, _, fanout), (ids, index) in zip(asked, split)
      ]
    return requests, [f for _, f, _ in asked]

  def _induce(self, inducer, requests, srcs, nbrs, outs, rows, cols) -> List[torch.Tensor]:
    """Adds a hop's answers to ``inducer`` (``srcs`` and ``nbrs``: the
    requests' seeds and the answers' neighbors as the inducer keys them);
    extends ``rows`` and ``cols`` (by output edge type) with their local
    indices. Returns the nodes new to each type."""
    schema = self.schema
    # Message passing runs neighbor -> the node it was sampled for: the
    # inducer's local seed indices are the output's cols, its neighbors' rows.
    seed_outs, nbr_outs = [], []
    for request, out in zip(requests, outs):
      key = schema.out_edge_type(request.etype)
      cols[key], seed_out = extended(cols[key], out.nbr.numel())
      rows[key], nbr_out = extended(rows[key], out.nbr.numel())
      seed_outs.append(seed_out)
      nbr_outs.append(nbr_out)
    new_nodes, _, _ = inducer.induce_next(
      [schema.type_index[schema.seed_type(r.etype)] for r in requests],
      [schema.type_index[schema.nbr_type(r.etype)] for r in requests],
      srcs,
      nbrs,
      [out.nbr_num for out in outs],
      row_outs=seed_outs,
      col_outs=nbr_outs,
    )
    return new_nodes

  def sample(
    self,
    seed_dict: Dict[NodeType, torch.Tensor],
    answer: HopAnswer,
    local: Optional[LocalDraws] = None,
    seed_time: Optional[Dict[NodeType, torch.Tensor]] = None,
  ) -> HopResult:
    """Samples every hop, each request answered by ``answer`` in turn, or
    drawn by the inducer from ``local`` where one is given.

    Args:
      seed_dict: checked seed ids by node type.
      answer: one hop's draw.
      local: the topologies ``answer`` draws from, when they are on the CPU.
      seed_time: the seeds' times by node type (temporal sampling).
    """
    steps = self.sample_steps(seed_dict, local=local, seed_time=seed_time)
    try:
      requests = next(steps)
      while True:
        requests = steps.send([answer(r) for r in requests])
    except StopIteration as done:
      return done.value
    finally:
      steps.close()

  # -- inputs and outputs -----------------------------------------------------

  def node_seeds(self, inputs: NodeSamplerInput) -> Tuple[NodeType, torch.Tensor]:
    """``(node type, checked seeds)`` of a batch of seed nodes."""
    inputs = NodeSamplerInput.cast(inputs)
    ntype = self.schema.input_node_type(inputs.input_type)
    return ntype, self.schema.check_seeds(inputs.node, ntype, self.sample_device)

  def to_output(
    self, res: HopResult, input_type, metadata
  ) -> Union[SamplerOutput, HeteroSamplerOutput]:
    """The sampler output of sampled hops, on the engine's device.

    ``batch`` holds the seeds (deduplicated, by node type). A heterogeneous
    output holds only the node and edge types that were sampled (its
    ``edge_types`` names them all), and counts them per hop in tensors that
    end at the last hop the type appeared in (GLT's layout).

    Args:
      res: the sampled hops.
      input_type: the seeds' node or edge type (heterogeneous outputs).
      metadata: the output's metadata.
    """

    dev = functools.partial(on_device, device=self.device)
    seeds = {t: nodes[: res.num_sampled_nodes[t][0]] for t, nodes in res.node.items()}
    edge_counts = res.num_sampled_edges
    host_nodes = res.node_on_host if self.device.type == 'cuda' else None
    if not self.schema.is_hetero:
      return SamplerOutput(
        node=dev(res.node[HOMO_NODE_TYPE]),
        row=dev(res.row[HOMO_EDGE_TYPE]),
        col=dev(res.col[HOMO_EDGE_TYPE]),
        edge=dev(res.edge[HOMO_EDGE_TYPE]) if res.edge is not None else None,
        batch=dev(seeds[HOMO_NODE_TYPE]),
        num_sampled_nodes=res.num_sampled_nodes[HOMO_NODE_TYPE],
        num_sampled_edges=edge_counts[HOMO_EDGE_TYPE] if edge_counts is not None else None,
        device=self.device,
        metadata=dev(metadata),
        seed_index=dev(res.seed_index[HOMO_NODE_TYPE]) if res.seed_index is not None else None,
        node_on_host=host_nodes[HOMO_NODE_TYPE] if host_nodes else None,
      )
    ntypes = [t for t, nodes in res.node.items() if nodes.numel() > 0]
    etypes = [e for e, rows in res.row.items() if rows.numel() > 0]
    # edge_types names every output edge type of the graph, sampled or not
    # (as in GLT); HeteroSamplerOutput.with_every_type fills in the others.
    return HeteroSamplerOutput(
      node=dev({t: res.node[t] for t in ntypes}),
      row=dev({e: res.row[e] for e in etypes}),
      col=dev({e: res.col[e] for e in etypes}),
      edge=dev({e: res.edge[e] for e in etypes}) if res.edge is not None else None,
      batch=dev({t: s for t, s in seeds.items() if s.numel() > 0}),
      num_sampled_nodes={t: hop_counts(res.num_sampled_nodes[t], self.device) for t in ntypes},
      num_sampled_edges=(
        {e: hop_counts(edge_counts[e], self.device) for e in etypes}
        if edge_counts is not None
        else None
      ),
      edge_types=list(res.row),
      input_type=input_type,
      device=self.device,
      metadata=dev(metadata),
      seed_index=(
        dev({t: res.seed_index[t] for t in ntypes}) if res.seed_index is not None else None
      ),
      node_on_host={t: host_nodes[t] for t in ntypes} if host_nodes else None,
    )

  def node_output(
    self,
    res: HopResult,
    ntype: NodeType,
    seed_time: Optional[Dict[NodeType, torch.Tensor]] = None,
  ) -> Union[SamplerOutput, HeteroSamplerOutput]:
    """The output of a batch of seed nodes of ``ntype``:
    ``metadata['seed_local']`` gives each input seed's local index, and in
    temporal sampling ``metadata['seed_time']`` the seeds' times.

    Args:
      res: the sampled hops.
      ntype: the seeds' node type.
      seed_time: the seeds' times by node type (temporal sampling), or None.
    """
    metadata = {'seed_local': res.seed_local[ntype]}
    if seed_time is not None:
      metadata['seed_time'] = seed_time[ntype]
    return self.to_output(res, ntype, metadata)

  # -- subgraphs --------------------------------------------------------------

  def subgraph_nodes(self, seeds: torch.Tensor, reached: torch.Tensor):
    """``(nodes, mapping)`` of a subgraph batch, as in GLT: the nodes reached
    sorted and deduplicated, and each seed's index among them."""
    nodes = torch.unique(reached)
    return nodes, torch.searchsorted(nodes, seeds)
