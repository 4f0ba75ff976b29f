"""DistNeighborSampler: multi-hop neighbor sampling over a partitioned graph.

Each hop is answered by this process's ``PartitionService``: every seed's
neighbors are drawn by the partition that owns it, here or over RPC, and
come back in seed order to the multi-hop engine that single-machine
sampling drives too (``MultiHopSampler.sample_steps``). A batch is a
coroutine that returns the sampler output, as ``NeighborSampler`` returns
it on one machine; the batch sources run them on an event loop and turn
them into channel messages (``sources.messages``).
"""

import asyncio
import logging
from typing import Dict, Literal, Optional, Union

import torch

from ...sampler.base import (
  EdgeSamplerInput,
  HeteroSamplerOutput,
  HopResult,
  NeighborOutput,
  NodeSamplerInput,
  SamplerOutput,
  SamplingConfig,
  SamplingType,
)
from ...sampler.hops import HostPartitions, LocalDraws, PieceDraws
from ...sampler.multihop import DENSE_INDUCER_BUDGET_BYTES, HopRequest, MultiHopSampler
from ...sampler.schema import RandomStream
from ...sampler.subgraph_types import bidirectional, checked_subgraph_type, induced_edges
from ...sampler.temporal import TEMPORAL_STRATEGIES, batch_seed_time
from ...sampler.whole_batch import LaunchedBatch
from ...typing import HOMO_NODE_TYPE, EdgeType, NodeType, NumNeighbors
from ...utils.device import to_device_async
from ..data.dataset import DistDataset
from ..runtime.context import get_context
from .partition_service import PartitionService
from .peer_requests import hop_pieces

_EDGE_STRATEGY = {'out': 'by_src', 'in': 'by_dst'}
# What the id-indexed inducer maps of all the job's sampling processes on a
# host take at most together: each process takes its share, at most
# DENSE_INDUCER_BUDGET_BYTES, so more sampling processes on a host do not
# hold more maps (the rest of their batches hash).
HOST_DENSE_INDUCER_BUDGET_BYTES = 1 << 30

logger = logging.getLogger(__name__)


def dense_map_budget_on_host() -> int:
  r"""This process's share of ``HOST_DENSE_INDUCER_BUDGET_BYTES``: split
  among the processes of its RPC world on this host, at most
  ``DENSE_INDUCER_BUDGET_BYTES``."""
  ctx = get_context()
  processes = ctx.processes_on_host if ctx is not None else 1
  return min(DENSE_INDUCER_BUDGET_BYTES, HOST_DENSE_INDUCER_BUDGET_BYTES // processes)


def check_edge_dir(data: DistDataset, edge_dir: str) -> None:
  r"""Refuses an ``edge_dir`` that ``data``'s partitions cannot sample in:
  another than the dataset's, or one that needs each node's edges in
  another partition than its own."""
  if edge_dir != data.edge_dir:
    raise ValueError(
      f"edge_dir '{edge_dir}' differs from the dataset's '{data.edge_dir}': the partition's "
      'topology was built for the latter'
    )
  strategy = (data.meta or {}).get('edge_assign_strategy')
  if strategy is not None and strategy != _EDGE_STRATEGY[edge_dir]:
    raise ValueError(
      f"edge_dir '{edge_dir}' samples each node's edges in its own partition, which needs "
      f"partitions made with edge_assign_strategy='{_EDGE_STRATEGY[edge_dir]}'; these were "
      f"made with '{strategy}'"
    )


class DistNeighborSampler:
  r"""Neighbor sampling across the partitions of a DistDataset: the
  distributed driver of the multi-hop engine (``sampler.multihop``).

  Without a ``service``, building one is collective: the sampler builds its
  process's PartitionService, which every process of the group builds at the
  same point. Samplers given a service (a server's, built once) are not.

  Args:
    data: this process's partition.
    num_neighbors: neighbors per hop (a dict by edge type when heterogeneous).
    with_edge: return sampled edge ids.
    with_neg: prepare negative sampling (link sampling); negatives are
      checked against the partition that owns each pair's edges.
    with_weight: sample proportionally to edge weights.
    edge_dir: must be the dataset's: 'out' needs partitions by source
      ('by_src'), 'in' by destination.
    device: where outputs go.
    seed: seeds the random stream.
    service: this process's PartitionService (default: build one).
    time_attr: temporal sampling by the partitions' 'node_time' or
      'edge_time' (PyG's ``time_attr``; see ``NeighborSampler``): a seed of
      time t reaches only the past, across partitions.
    temporal_strategy: 'uniform' or 'last' (the most recent neighbors).
    disjoint: every seed grows a subgraph of its own (always, when
      temporal); outputs carry each node's seed in ``seed_index``.
    subgraph_type: 'directional', 'bidirectional' or 'induced' (PyG's).
  """

  def __init__(
    self,
    data: DistDataset,
    num_neighbors: Optional[NumNeighbors] = None,
    with_edge: bool = False,
    with_neg: bool = False,
    with_weight: bool = False,
    edge_dir: Literal['in', 'out'] = 'out',
    device: Optional[torch.device] = None,
    seed: Optional[int] = None,
    service: Optional[PartitionService] = None,
    time_attr: Optional[str] = None,
    temporal_strategy: str = 'uniform',
    disjoint: bool = False,
    subgraph_type: str = 'directional',
  ):
    if temporal_strategy not in TEMPORAL_STRATEGIES:
      raise ValueError(
        f'temporal_strategy must be one of {TEMPORAL_STRATEGIES}, got {temporal_strategy!r}'
      )
    check_edge_dir(data, edge_dir)
    self.data = data
    self.num_neighbors = num_neighbors
    self.with_edge = with_edge
    self.with_neg = with_neg
    self.with_weight = with_weight
    self.edge_dir = edge_dir
    self.device = device or torch.device('cpu')
    self.num_partitions = data.num_partitions
    self.partition_idx = data.partition_idx
    self.service = service if service is not None else PartitionService(data)
    self.service.check_sampling(edge_dir, with_weight)
    self.time_attr = time_attr
    self.temporal = None if time_attr is None else self.service.temporal_sampling(time_attr)
    self.last = temporal_strategy == 'last'
    self.disjoint = bool(disjoint) or self.temporal is not None
    self.subgraph_type = checked_subgraph_type(subgraph_type, self.disjoint)
    self.random = RandomStream(seed)
    self.engine = self._engine(torch.device('cpu'))  # link, subgraph and induced steps
    self._hop_engines = {self.engine.sample_device: self.engine}
    self._partitions = self._host_partitions()
    self._paths_logged = set()  # _log_path

  def _engine(self, sample_device: torch.device) -> MultiHopSampler:
    r"""An engine that samples, and outputs, on ``sample_device``."""
    return MultiHopSampler(
      self.service.schema,
      self.num_neighbors,
      self.with_edge,
      self.random,
      device=sample_device,
      sample_device=sample_device,
      disjoint=self.disjoint,
      dense_map_budget=dense_map_budget_on_host(),
    )

  def _hop_engine(self) -> MultiHopSampler:
    r"""The engine a batch's hops run on: on the service's ``hop_device``
    (the GPU this partition samples on: the draws and the inducer stay
    there, peers' pieces over RPC moved there), for batches with no times,
    no disjoint keys and no induced edges; else on the CPU, where hops
    drawn apart meet."""
    device = self.service.hop_device
    if self.temporal is not None or self.disjoint or self.subgraph_type == 'induced':
      device = torch.device('cpu')
    if device not in self._hop_engines:
      self._hop_engines[device] = self._engine(device)
    return self._hop_engines[device]

  def _host_partitions(self) -> Optional[HostPartitions]:
    r"""Every partition's topologies and node books on the GPU where the
    service draws every partition's hops (a whole batch is then drawn over
    them in one call); None elsewhere, or where a book makes no tensor
    (``PartitionBook.lookup_tensor``: the hops are then drawn one by one)."""
    device = self.service.hop_device
    if device.type != 'cuda' or not self.service.draws_hops_in_one_call:
      return None
    schema = self.engine.schema
    dist_graph = self.service.dist_graph
    books = {t: dist_graph.node_book(t).lookup_tensor(device) for t in schema.node_types}
    if any(book is None for book in books.values()):
      return None
    topologies = [
      {etype: self.service.topology(etype, p) for etype in schema.edge_types}
      for p in range(self.num_partitions)
    ]
    return HostPartitions(topologies, books)

  def _partitioned_draws(self, engine: MultiHopSampler, random: RandomStream):
    r"""The draws of a batch over the host's partitions in one call
    (``LocalDraws``), where ``engine`` samples on their GPU and every fanout
    has a bound; else None: the hops are asked for one by one."""
    reason = self._hop_by_hop_reason(engine)
    self._log_path(engine.sample_device, reason)
    if reason is not None:
      return None
    self.service.host_peers.check()
    return LocalDraws({}, random, self.with_edge, self.with_weight, partitions=self._partitions)

  def _hop_by_hop_reason(self, engine: MultiHopSampler) -> Optional[str]:
    r"""Why ``engine``'s batches are not drawn over the host's partitions
    in one call, or None where they are."""
    service = self.service
    if engine.sample_device.type != 'cuda':
      if service.hop_device.type == 'cuda':
        return 'temporal, disjoint and induced batches meet on the CPU'
      return 'the partition samples on the CPU'
    bounded = all(k >= 0 for fanout in engine.fanouts.values() for k in fanout)
    if not service.draws_hops_in_one_call:
      if bounded:  # hop_pieces
        return (
          'partitions on other hosts answer their hops over RPC; the inducer draws those held '
          'here and adds the answers in one pass a hop'
        )
      return 'partitions on other hosts answer their hops over RPC'
    if self._partitions is None:
      return 'a partition book has no tensor form to read on the GPU'
    if not bounded:
      return 'a fanout of -1 leaves the hops unbounded'
    return None

  def _log_path(self, device: torch.device, reason: Optional[str]) -> None:
    r"""Says (INFO, once a path) how this sampler's batches are drawn."""
    if (device, reason) in self._paths_logged:
      return
    self._paths_logged.add((device, reason))
    if reason is None:
      path = f"on {device} in one call over this host's {self.num_partitions} partitions"
    else:
      path = f'hop by hop on {device} ({reason})'
    logger.info('partition %d draws its batches %s', self.partition_idx, path)

  @classmethod
  def from_config(
    cls,
    data: DistDataset,
    config: SamplingConfig,
    seed: Optional[int] = None,
    service: Optional[PartitionService] = None,
  ) -> 'DistNeighborSampler':
    r"""The sampler a loader's ``SamplingConfig`` describes.

    Args:
      data: this process's partition.
      config: the loader's sampling configuration.
      seed: seeds the random stream (default: the config's).
      service: this process's PartitionService (default: build one).
    """
    return cls(
      data,
      config.num_neighbors,
      with_edge=config.with_edge,
      with_neg=config.with_neg,
      with_weight=config.with_weight,
      edge_dir=config.edge_dir,
      seed=config.seed if seed is None else seed,
      service=service,
      time_attr=config.time_attr,
      temporal_strategy=config.temporal_strategy,
      disjoint=config.disjoint,
      subgraph_type=config.subgraph_type,
    )

  # -- one hop -------------------------------------------------------------

  async def _answer(
    self, request: HopRequest, rng_seed: int, pieces: bool = False
  ) -> Union[NeighborOutput, PieceDraws]:
    r"""``request``'s answer: drawn by the partitions that own its seeds,
    or, with ``pieces``, left to the inducer to draw where they run here
    (its seeds on the host: the hop's one host sync is the inducer's)."""
    seed_type = self.engine.schema.seed_type(request.etype)
    if pieces:
      args = (request.fanout, request.etype, self.with_edge, self.with_weight, rng_seed)
      return await hop_pieces(self.service, seed_type, request.host_seeds, *args)
    return await self.service.sample_neighbors(
      seed_type,
      request.seeds,
      request.fanout,
      request.etype,
      rng_seed,
      self.with_edge,
      self.with_weight,
      request.seed_time,
      self.time_attr,
      self.last,
    )

  async def _sample(
    self,
    seed_dict: Dict[NodeType, torch.Tensor],
    random: RandomStream,
    seed_time: Optional[Dict[NodeType, torch.Tensor]] = None,
    engine: Optional[MultiHopSampler] = None,
  ) -> HopResult:
    r"""The batch's hops from ``seed_dict``, run by ``engine`` and on its
    device (default: ``_hop_engine``'s, the result on the CPU)."""
    on_host = engine is None
    engine = engine or self._hop_engine()
    local = self._partitioned_draws(engine, random)
    if local is not None or seed_time is not None:
      # (else the engine keeps them on the host too: a GPU's hops group them there)
      seed_dict = {t: to_device_async(s, engine.sample_device) for t, s in seed_dict.items()}
    launched = engine.launch(seed_dict, local) if local is not None and seed_time is None else None
    if launched is not None:
      res = await self._finished(launched)
    else:
      res = await self._hop_by_hop(engine, seed_dict, random, seed_time, local)
    if on_host:
      res = res.to(self.engine.sample_device)  # where the batch's other steps run
    if self.subgraph_type == 'induced':
      res = await self._induced(res)
    return res

  async def _hop_by_hop(self, engine, seed_dict, random, seed_time, local) -> HopResult:
    r"""``_sample``'s hops asked for one by one (each request answered by
    the partitions that own its seeds), or drawn by the inducer from
    ``local``."""
    steps = engine.sample_steps(seed_dict, seed_time=seed_time, local=local)
    try:
      requests = next(steps)
      while True:
        # The kernel seeds are drawn before the requests run, in request
        # order: what a batch draws does not depend on when peers answer.
        rng_seeds = random.kernel_seeds(len(requests))
        pieces = engine.sample_device.type == 'cuda' and all(
          r.host_seeds is not None and r.fanout >= 0 for r in requests
        )
        answers = [self._answer(r, s, pieces) for r, s in zip(requests, rng_seeds)]
        # (one request, as every hop of a homogeneous graph: awaited as it
        # is, without the tasks a gather makes)
        outs = [await answers[0]] if len(answers) == 1 else await asyncio.gather(*answers)
        requests = steps.send(list(outs))
    except StopIteration as done:
      return done.value
    finally:
      steps.close()

  @staticmethod
  async def _finished(launched: LaunchedBatch) -> HopResult:
    r"""A launched batch's HopResult, once the event loop's other batches
    have had their turn: they prepare and launch theirs while the GPU draws
    this one."""
    try:
      await asyncio.sleep(0)  # a turn for the others, no wait
    except BaseException:
      launched.discard()
      raise
    return launched.finish()

  async def _induced(self, res: HopResult) -> HopResult:
    r"""``res`` with every edge of the graph among its nodes (PyG's
    'induced' subgraph type): every neighbor of its nodes, drawn by the
    partitions that own them, kept where it is a node of ``res`` too."""
    schema = self.engine.schema
    etypes = [e for e in schema.edge_types if res.node[schema.seed_type(e)].numel()]
    outs = await asyncio.gather(
      *[
        self.service.sample_neighbors(
          schema.seed_type(e), res.node[schema.seed_type(e)], -1, e, 0, self.with_edge
        )
        for e in etypes
      ]
    )
    return induced_edges(res, schema, dict(zip(etypes, outs)), self.with_edge)

  def _finish(self, out):
    r"""The output in the asked subgraph type (bidirectional edges)."""
    return bidirectional(out) if self.subgraph_type == 'bidirectional' else out

  # -- negative sampling -----------------------------------------------------

  async def _has_edge(self, etype: EdgeType, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    r"""Whether each (src, dst) is an edge, asked of the partition that
    stores its edges (the source's for edge_dir 'out', else the
    destination's)."""
    rows, cols = (src, dst) if self.edge_dir == 'out' else (dst, src)
    return await self.service.has_edges(self.engine.schema.seed_type(etype), rows, cols, etype)

  async def _sample_negative(
    self,
    random: RandomStream,
    etype: EdgeType,
    num: int,
    src: Optional[torch.Tensor] = None,
    trials: int = 5,
  ) -> torch.Tensor:
    r"""``[2, n]`` (src, dst) pairs that are not edges, as the local
    ``RandomNegativeSampler.sample(num, padding=True, src=src)`` draws them:
    uniform pairs (or a uniform destination per fixed source), each redrawn
    up to ``trials`` times while it hits an edge of the whole graph, and
    kept after the last try."""
    num_src = self.engine.schema.num_nodes[etype[0]]
    num_dst = self.engine.schema.num_nodes[etype[-1]]
    fixed = src is not None
    if fixed:
      src = src.clone()
      num = src.numel()
    else:
      src = random.randint(num_src, num)
    dst = random.randint(num_dst, num)
    pending = torch.arange(num)
    for trial in range(trials):
      if pending.numel() == 0:
        break
      if trial > 0:
        if not fixed:
          src[pending] = random.randint(num_src, pending.numel())
        dst[pending] = random.randint(num_dst, pending.numel())
      pending = pending[await self._has_edge(etype, src[pending], dst[pending])]
    return torch.stack([src, dst])

  # -- subgraph ----------------------------------------------------------------

  async def _subgraph(self, inputs: NodeSamplerInput, random: RandomStream) -> SamplerOutput:
    if self.engine.schema.is_hetero:
      raise ValueError('subgraph sampling supports homogeneous graphs only')
    if self.disjoint:
      raise ValueError('subgraph sampling is neither disjoint nor temporal')
    _, seeds = self.engine.node_seeds(inputs)
    reached = seeds
    if self.engine.num_hops:
      reached = (await self._sample({HOMO_NODE_TYPE: seeds}, random)).node[HOMO_NODE_TYPE]
    # As on one machine (and in GLT): the nodes sorted, each seed's index.
    nodes, mapping = self.engine.subgraph_nodes(seeds, reached)
    # Every partition holds the edges of its own rows: each finds those
    # among the nodes, in the same local numbering.
    rows, cols, eids = await self.service.induced_edges(nodes, self.with_edge)
    return SamplerOutput(
      node=nodes,
      row=cols,
      col=rows,
      edge=eids if self.with_edge else None,
      metadata={'mapping': mapping},
    )

  # -- batches ---------------------------------------------------------------

  async def _sample_from_nodes(self, inputs: NodeSamplerInput, random: RandomStream):
    # The seeds checked on the host, where they come from; the batch on the
    # hops' device.
    engine = self._hop_engine()
    ntype, seeds = self.engine.node_seeds(inputs)  # on the host: _sample moves them
    given = {ntype: inputs.time} if inputs.time is not None else None
    seed_time = batch_seed_time(self.temporal, {ntype: seeds}, given)
    res = await self._sample({ntype: seeds}, random, seed_time, engine)
    return self._finish(engine.node_output(res, ntype, seed_time))

  async def _sample_from_edges(self, inputs: EdgeSamplerInput, random: RandomStream):
    batch = self.engine.link_batch(inputs)
    strict = None
    if batch.strict_negatives is not None:
      strict = await self._sample_negative(random, batch.etype, *batch.strict_negatives)
    seeds, parts = self.engine.link_seeds(batch, strict, random)
    seed_time = batch_seed_time(self.temporal, seeds, self.engine.link_seed_time(batch))
    res = await self._sample(seeds, random, seed_time)
    return self._finish(self.engine.link_output(batch, res, parts))

  async def sample(
    self, sampling_type: SamplingType, inputs, random: Optional[RandomStream] = None
  ) -> Union[SamplerOutput, HeteroSamplerOutput]:
    r"""Samples one batch across partitions (a coroutine: run it on an
    event loop, ``ConcurrentEventLoop``, several batches at once).

    Args:
      sampling_type: NODE (the neighborhood of seed nodes), LINK (of seed
        edges' endpoints, with their negatives) or SUBGRAPH (the subgraph
        induced by the seeds and, with ``num_neighbors``, their sampled
        neighbors; ``metadata['mapping']`` gives the seeds' local indices).
      inputs: the seeds: a ``NodeSamplerInput`` (or ids) for NODE and
        SUBGRAPH, an ``EdgeSamplerInput`` for LINK.
      random: the batch's random stream (``RandomStream.for_batch``;
        default: the sampler's, shared by the batches in flight).
    """
    random = random or self.random
    if sampling_type == SamplingType.NODE:
      return await self._sample_from_nodes(NodeSamplerInput.cast(inputs), random)
    if sampling_type == SamplingType.LINK:
      return await self._sample_from_edges(EdgeSamplerInput.cast(inputs), random)
    if sampling_type == SamplingType.SUBGRAPH:
      return await self._subgraph(NodeSamplerInput.cast(inputs), random)
    raise ValueError(f'{sampling_type} sampling is not supported')
