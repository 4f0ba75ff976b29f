"""DistNeighborSampler: multi-hop neighbor sampling over a partitioned graph.

Each hop is answered by this process's ``PartitionService``: every seed's
neighbors are drawn by the partition that owns it, here or over RPC, and
come back in seed order to the multi-hop engine that single-machine
sampling drives too (``MultiHopSampler.sample_steps``). Batches
run as coroutines on an event loop, ``concurrency`` at a time, and leave as
channel messages (``batch.codec``) with their features and labels.
"""

import asyncio
from typing import Dict, Literal, Optional

import torch

from ...batch.codec import encode
from ...batch.features import collect_features
from ...batch.sampled import SampledBatch
from ...channel import ChannelBase, SampleMessage
from ...sampler.base import (
  EdgeSamplerInput,
  HopResult,
  NeighborOutput,
  NodeSamplerInput,
  SamplerOutput,
  SamplingConfig,
  SamplingType,
)
from ...sampler.multihop import HopRequest, MultiHopSampler
from ...sampler.schema import RandomStream
from ...sampler.subgraph_types import bidirectional, checked_subgraph_type, induced_edges
from ...sampler.temporal import TEMPORAL_STRATEGIES, batch_seed_time
from ...typing import HOMO_NODE_TYPE, EdgeType, NodeType, NumNeighbors
from ..dist_dataset import DistDataset
from ..runtime.event_loop import ConcurrentEventLoop, wrap_torch_future
from .partition_service import PartitionService

_EDGE_STRATEGY = {'out': 'by_src', 'in': 'by_dst'}


class DistNeighborSampler(ConcurrentEventLoop):
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
    collect_features: gather node (and edge) features and labels into the
      batch.
    channel: where finished batches go (``sample_from_nodes`` then returns at
      once); None returns them.
    use_all2all: unsupported; must be False.
    concurrency: batches in flight at once.
    device: where outputs go.
    seed: seeds the random stream.
    service: this process's PartitionService (default: build one).
    defer_feature_rows: leave the node and edge feature rows of a message
      as :class:`~graphlearn_torch.channel.DeferredTensor` entries, gathered
      when the message is written: for batches bound for a ``ShmChannel``,
      which gathers them straight into its shared memory.
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
    collect_features: bool = False,
    channel: Optional[ChannelBase] = None,
    use_all2all: bool = False,
    concurrency: int = 1,
    device: Optional[torch.device] = None,
    seed: int = None,
    service: Optional[PartitionService] = None,
    defer_feature_rows: bool = False,
    time_attr: Optional[str] = None,
    temporal_strategy: str = 'uniform',
    disjoint: bool = False,
    subgraph_type: str = 'directional',
  ):
    super().__init__(concurrency)
    if temporal_strategy not in TEMPORAL_STRATEGIES:
      raise ValueError(
        f'temporal_strategy must be one of {TEMPORAL_STRATEGIES}, got {temporal_strategy!r}'
      )
    if use_all2all:
      raise ValueError('use_all2all is not supported: features are fetched by RPC')
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
    self.data = data
    self.num_neighbors = num_neighbors
    self.with_edge = with_edge
    self.with_weight = with_weight
    self.edge_dir = edge_dir
    self.collect_features = collect_features
    self.defer_feature_rows = defer_feature_rows
    self.channel = channel
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
    self.engine = MultiHopSampler(
      self.service.schema, num_neighbors, with_edge, self.random, disjoint=self.disjoint
    )

  @classmethod
  def from_config(
    cls, data: DistDataset, config: SamplingConfig, seed: Optional[int] = None, **kwargs
  ) -> 'DistNeighborSampler':
    r"""The sampler a loader's ``SamplingConfig`` describes.

    Args:
      data: this process's partition.
      config: the loader's sampling configuration.
      seed: seeds the random stream (default: the config's).
      **kwargs: ``channel``, ``concurrency``, ``service``, ...
    """
    return cls(
      data,
      config.num_neighbors,
      with_edge=config.with_edge,
      with_neg=config.with_neg,
      with_weight=config.with_weight,
      edge_dir=config.edge_dir,
      collect_features=config.collect_features,
      seed=config.seed if seed is None else seed,
      time_attr=config.time_attr,
      temporal_strategy=config.temporal_strategy,
      disjoint=config.disjoint,
      subgraph_type=config.subgraph_type,
      **kwargs,
    )

  # -- one hop -------------------------------------------------------------

  async def _answer(self, request: HopRequest, rng_seed: int) -> NeighborOutput:
    return await self.service.sample_neighbors(
      self.engine.schema.seed_type(request.etype),
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
  ) -> HopResult:
    steps = self.engine.sample_steps(seed_dict, seed_time=seed_time)
    try:
      requests = next(steps)
      while True:
        # The kernel seeds are drawn before the requests run, in request
        # order: what a batch draws does not depend on when peers answer.
        rng_seeds = [random.kernel_seed() for _ in requests]
        outs = await asyncio.gather(*[self._answer(r, s) for r, s in zip(requests, rng_seeds)])
        requests = steps.send(list(outs))
    except StopIteration as done:
      res = done.value
    finally:
      steps.close()
    if self.subgraph_type == 'induced':
      res = await self._induced(res)
    return res

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

  # -- batches -----------------------------------------------------------------

  async def _sample_from_nodes(self, inputs: NodeSamplerInput, random: RandomStream):
    ntype, seeds = self.engine.node_seeds(inputs)
    given = {ntype: inputs.time} if inputs.time is not None else None
    seed_time = batch_seed_time(self.temporal, {ntype: seeds}, given)
    res = await self._sample({ntype: seeds}, random, seed_time)
    return self._finish(self.engine.node_output(res, ntype, seed_time))

  async def _sample_from_edges(self, inputs: EdgeSamplerInput, random: RandomStream):
    batch = self.engine.link_batch(inputs)
    strict = None
    if batch.strict_negatives is not None:
      strict = await self._sample_negative(random, batch.etype, *batch.strict_negatives)
    seeds, parts = self.engine.link_seeds(batch, strict, random)
    seed_time = batch_seed_time(self.temporal, seeds, self.engine.link_seed_time(batch))
    res = await self._sample(seeds, random, seed_time)
    return self._finish(self.engine.link_output(batch, res, parts))

  async def _message(self, out, input_id: Optional[torch.Tensor]) -> SampleMessage:
    r"""The message of a sampler output, with its features and labels when
    the sampler collects them."""
    batch = SampledBatch.from_output(out)
    batch.input_id = input_id
    if self.collect_features:

      def rows(feature):
        if feature is None:
          return None
        return feature.async_deferred if self.defer_feature_rows else feature.async_get

      await wrap_torch_future(
        collect_features(
          batch,
          self.data,
          node_rows=rows(self.service.node_feature),
          edge_rows=rows(self.service.edge_feature),
        )
      )
    return encode(batch)

  async def _sample_message(
    self,
    sampling_type: SamplingType,
    inputs,
    input_id: Optional[torch.Tensor],
    random: RandomStream,
  ) -> SampleMessage:
    if sampling_type == SamplingType.NODE:
      out = await self._sample_from_nodes(NodeSamplerInput.cast(inputs), random)
    elif sampling_type == SamplingType.LINK:
      out = await self._sample_from_edges(EdgeSamplerInput.cast(inputs), random)
    else:
      out = await self._subgraph(NodeSamplerInput.cast(inputs), random)
    return await self._message(out, input_id)

  def sample_coroutine(
    self,
    sampling_type: SamplingType,
    inputs,
    input_id: Optional[torch.Tensor] = None,
    random: Optional[RandomStream] = None,
  ):
    r"""The coroutine that samples one batch of ``inputs`` (seed nodes for
    NODE and SUBGRAPH, seed edges for LINK) into a message.

    Args:
      sampling_type: what to sample.
      inputs: the seeds.
      input_id: the seeds' positions among their loader's seeds, which the
        message carries.
      random: the batch's random stream (``RandomStream.for_batch``; default:
        the sampler's, shared by the batches in flight).
    """
    if sampling_type not in (SamplingType.NODE, SamplingType.LINK, SamplingType.SUBGRAPH):
      raise ValueError(f'{sampling_type} sampling is not supported')
    return self._sample_message(sampling_type, inputs, input_id, random or self.random)

  def sample_from_nodes(
    self, inputs: NodeSamplerInput, timeout: Optional[float] = None, **kwargs
  ) -> Optional[SampleMessage]:
    r"""Samples the neighborhood of ``inputs`` across partitions.

    With a channel, the batch is sent there when done and this returns None
    once the batch is in flight; else it waits and returns the batch as a
    message (see ``batch.codec``).

    Args:
      inputs: the seeds.
      timeout: seconds to wait (for the result, or for a free place among
        ``concurrency``).
    """
    return self._run(self.sample_coroutine(SamplingType.NODE, inputs), timeout, **kwargs)

  def sample_from_edges(
    self, inputs: EdgeSamplerInput, timeout: Optional[float] = None, **kwargs
  ) -> Optional[SampleMessage]:
    r"""Samples the neighborhood of seed edges (and their negatives) across
    partitions; returns or sends the batch as ``sample_from_nodes`` does.

    Args:
      inputs: the seed edges and negative sampling.
      timeout: seconds to wait.
    """
    return self._run(self.sample_coroutine(SamplingType.LINK, inputs), timeout, **kwargs)

  def subgraph(
    self, inputs: NodeSamplerInput, timeout: Optional[float] = None, **kwargs
  ) -> Optional[SampleMessage]:
    r"""The subgraph induced by the seeds and (with ``num_neighbors``) their
    sampled neighbors, across partitions; returns or sends the batch as
    ``sample_from_nodes`` does. ``meta/mapping`` gives the seeds' local
    indices.

    Args:
      inputs: the seeds.
      timeout: seconds to wait.
    """
    return self._run(self.sample_coroutine(SamplingType.SUBGRAPH, inputs), timeout, **kwargs)

  def _run(self, coro, timeout: Optional[float], on_error=None) -> Optional[SampleMessage]:
    if self.channel is None:
      return self.run_task(coro, timeout)
    self.add_task(coro, callback=self.channel.send, on_error=on_error, timeout=timeout)
    return None
