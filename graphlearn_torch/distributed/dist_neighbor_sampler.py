"""DistNeighborSampler: multi-hop neighbor sampling over a partitioned graph.

Each hop splits the frontier by the node partition book; seeds of this
partition are sampled here by the C++ sampler, the others by one RPC per
owning partition (sent first, so they run while the local part is drawn);
the pieces are stitched back in frontier order and handed to the same
dedup-and-relabel step as single-machine sampling (``NeighborSampler.
sample_steps``). Batches run as coroutines on an event loop, ``concurrency``
at a time.
"""

import asyncio
import logging
import queue
from typing import Dict, List, Literal, Optional, Tuple, Union

import torch

from ..channel import ChannelBase, SampleMessage
from ..sampler.base import (
  EdgeSamplerInput,
  HeteroSamplerOutput,
  NeighborOutput,
  NodeSamplerInput,
  SamplerOutput,
  SamplingConfig,
  SamplingType,
)
from ..sampler.neighbor_sampler import NeighborSampler
from ..typing import (
  HOMO_EDGE_TYPE,
  HOMO_NODE_TYPE,
  EdgeType,
  NodeType,
  NumNeighbors,
  reverse_edge_type,
)
from .dist_dataset import DistDataset
from .dist_graph import positions_by_partition
from .event_loop import ConcurrentEventLoop, wrap_torch_future
from .message import to_message
from .partition_service import PartitionService
from .rpc import rpc_request_async

logger = logging.getLogger(__name__)

_EDGE_STRATEGY = {'out': 'by_src', 'in': 'by_dst'}


def stitch_neighbors(
  num_seeds: int, parts: List[Tuple[torch.Tensor, NeighborOutput]], with_edge: bool
) -> NeighborOutput:
  r"""One NeighborOutput in seed order from per-partition pieces.

  Args:
    num_seeds: seeds of the hop.
    parts: ``(positions of its seeds, their NeighborOutput)`` per partition.
    with_edge: whether the pieces carry edge ids.
  """
  if len(parts) == 1 and parts[0][0].numel() == num_seeds:
    pos, out = parts[0]
    if bool((pos == torch.arange(num_seeds)).all()):
      return out
  nbr_num = torch.zeros(num_seeds, dtype=torch.int64)
  for pos, out in parts:
    nbr_num.index_copy_(0, pos, out.nbr_num)
  starts = torch.cumsum(nbr_num, 0) - nbr_num
  total = int(nbr_num.sum())
  nbr = torch.empty(total, dtype=torch.int64)
  edge = torch.empty(total, dtype=torch.int64) if with_edge else None
  for pos, out in parts:
    if out.nbr.numel() == 0:
      continue
    piece_starts = torch.cumsum(out.nbr_num, 0) - out.nbr_num
    dest = torch.repeat_interleave(starts.index_select(0, pos) - piece_starts, out.nbr_num)
    dest += torch.arange(out.nbr.numel())
    nbr.index_copy_(0, dest, out.nbr)
    if with_edge:
      edge.index_copy_(0, dest, out.edge)
  return NeighborOutput(nbr, nbr_num, edge)


class DistNeighborSampler(ConcurrentEventLoop):
  r"""Neighbor sampling across the partitions of a DistDataset.

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
  ):
    super().__init__(concurrency)
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
    self.channel = channel
    self.device = device or torch.device('cpu')
    self.num_partitions = data.num_partitions
    self.partition_idx = data.partition_idx
    self.sampler = NeighborSampler(
      data.graph,
      num_neighbors,
      device=torch.device('cpu'),
      with_edge=with_edge,
      with_weight=with_weight,
      edge_dir=edge_dir,
      seed=seed,
    )
    self._inducers: queue.SimpleQueue = queue.SimpleQueue()
    for _ in range(concurrency):
      self._inducers.put(self.sampler.create_inducer())
    self.service = service if service is not None else PartitionService(data)
    self.router = self.service.router
    self.dist_graph = self.service.dist_graph
    self.dist_node_feature = self.service.node_feature if collect_features else None
    self.dist_edge_feature = self.service.edge_feature if collect_features and with_edge else None

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
      **kwargs,
    )

  # -- routing ---------------------------------------------------------------

  async def _on_owners(
    self, ntype: NodeType, tensors: Tuple[torch.Tensor, ...], local_fn, callee_id: int, *args
  ) -> List[Tuple[torch.Tensor, object]]:
    r"""Runs a request on the partitions that own ``tensors[0]``'s nodes.

    Splits the positions of ``tensors`` by owner; remote pieces go out first
    (one request per partition, ``callee_id(*pieces, *args)``), then the
    local piece runs here (``local_fn(*pieces, *args)``). Returns
    ``(positions, result)`` per partition that had any.
    """
    book = self.dist_graph.node_book(None if ntype == HOMO_NODE_TYPE else ntype)
    positions = positions_by_partition(book[tensors[0]], self.num_partitions)
    remote = []
    for p, pos in enumerate(positions):
      if p != self.partition_idx and pos.numel():
        pieces = tuple(t.index_select(0, pos) for t in tensors)
        worker = self.router.get_to_worker(p)
        fut = rpc_request_async(worker, callee_id, pieces + args)
        remote.append((p, worker, pos, wrap_torch_future(fut)))
    parts = []
    local = positions[self.partition_idx]
    if local.numel():
      parts.append((local, local_fn(*(t.index_select(0, local) for t in tensors), *args)))
    for p, worker, pos, fut in remote:
      try:
        parts.append((pos, await fut))
      except Exception as e:
        raise RuntimeError(
          f'partition {p} ({worker}) failed to answer: {type(e).__name__}: {e}'
        ) from e
    return parts

  # -- one hop -------------------------------------------------------------

  def _local_one_hop(self, seeds, fanout, etype, with_edge, with_weight) -> NeighborOutput:
    return self.sampler.sample_one_hop(seeds, fanout, etype)  # this sampler's random stream

  async def _sample_one_hop(self, seeds: torch.Tensor, fanout: int, etype: EdgeType):
    parts = await self._on_owners(
      self.sampler._seed_type(etype),
      (seeds,),
      self._local_one_hop,
      self.service.sampling_callee_id,
      fanout,
      etype,
      self.with_edge,
      self.with_weight,
    )
    if not parts:
      empty = torch.empty(0, dtype=torch.int64)
      return NeighborOutput(empty, empty, empty if self.with_edge else None)
    return stitch_neighbors(seeds.numel(), parts, self.with_edge)

  async def _sample(self, seed_dict: Dict[NodeType, torch.Tensor]):
    inducer = self._inducers.get()
    try:
      steps = self.sampler.sample_steps(seed_dict, inducer)
      try:
        requests = next(steps)
        while True:
          outs = await asyncio.gather(
            *[self._sample_one_hop(src, k, etype) for etype, src, k in requests]
          )
          requests = steps.send(list(outs))
      except StopIteration as done:
        return done.value
    finally:
      self._inducers.put(inducer)

  # -- negative sampling -----------------------------------------------------

  async def _has_edge(self, etype: EdgeType, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    r"""Whether each (src, dst) is an edge, asked of the partition that
    stores its edges (the source's for edge_dir 'out', else the
    destination's)."""
    rows, cols = (src, dst) if self.edge_dir == 'out' else (dst, src)
    parts = await self._on_owners(
      self.sampler._seed_type(etype),
      (rows, cols),
      self.service.has_edge,
      self.service.edge_check_callee_id,
      etype,
    )
    found = torch.zeros(src.numel(), dtype=torch.bool)
    for pos, hit in parts:
      found[pos] = hit
    return found

  async def _sample_negative(
    self, etype: EdgeType, num: int, src: Optional[torch.Tensor] = None, trials: int = 5
  ) -> torch.Tensor:
    r"""``[2, n]`` (src, dst) pairs that are not edges, as the local
    ``RandomNegativeSampler.sample(num, padding=True, src=src)`` draws them:
    uniform pairs (or a uniform destination per fixed source), each redrawn
    up to ``trials`` times while it hits an edge of the whole graph, and
    kept after the last try."""
    generator = self.sampler._generator
    num_src = self.sampler._num_nodes[etype[0]]
    num_dst = self.sampler._num_nodes[etype[-1]]
    fixed = src is not None
    if fixed:
      src = src.clone()
      num = src.numel()
    else:
      src = torch.randint(0, num_src, (num,), generator=generator)
    dst = torch.randint(0, num_dst, (num,), generator=generator)
    pending = torch.arange(num)
    for trial in range(trials):
      if pending.numel() == 0:
        break
      if trial > 0:
        if not fixed:
          src[pending] = torch.randint(0, num_src, (pending.numel(),), generator=generator)
        dst[pending] = torch.randint(0, num_dst, (pending.numel(),), generator=generator)
      pending = pending[await self._has_edge(etype, src[pending], dst[pending])]
    return torch.stack([src, dst])

  # -- subgraph ----------------------------------------------------------------

  async def _subgraph(self, inputs: NodeSamplerInput) -> SampleMessage:
    if self.sampler.is_hetero:
      raise ValueError('subgraph sampling supports homogeneous graphs only')
    seeds = self.sampler._check_seeds(inputs.node, HOMO_NODE_TYPE)
    reached = seeds
    if self.sampler.num_hops:
      reached = (await self._sample({HOMO_NODE_TYPE: seeds})).node[HOMO_NODE_TYPE]
    # As on one machine (and in GLT): the nodes sorted, each seed's index.
    nodes = torch.unique(reached)
    mapping = torch.searchsorted(nodes, seeds)
    # Every partition holds the edges of its own rows: each finds those
    # among the nodes, in the same local numbering.
    futures = [
      wrap_torch_future(
        rpc_request_async(
          self.router.get_to_worker(p), self.service.subgraph_callee_id, (nodes, self.with_edge)
        )
      )
      for p in range(self.num_partitions)
      if p != self.partition_idx
    ]
    pieces = [self.service.subgraph_edges(nodes, self.with_edge)]
    for fut in futures:
      pieces.append(await fut)
    rows, cols, eids = (torch.cat([piece[i] for piece in pieces]) for i in range(3))
    out = SamplerOutput(
      node=nodes,
      row=cols,
      col=rows,
      edge=eids if self.with_edge else None,
      metadata={'mapping': mapping},
    )
    return await self._collect(out)

  # -- features --------------------------------------------------------------

  async def _collect(self, out: Union[SamplerOutput, HeteroSamplerOutput]) -> SampleMessage:
    hetero = isinstance(out, HeteroSamplerOutput)
    if hetero:
      out = out.with_every_type()  # batches hold every type, as PyG's models need
    nodes = out.node if hetero else {HOMO_NODE_TYPE: out.node}
    node_feats, labels, edge_feats = {}, {}, {}
    pending = []
    if self.dist_node_feature is not None:
      for ntype, ids in nodes.items():
        if not hetero or ntype in self.data.node_features:
          key = ntype if hetero else None
          fut = wrap_torch_future(self.dist_node_feature.async_get(ids, key))
          pending.append((node_feats, ntype, fut))
    if self.dist_edge_feature is not None and out.edge is not None:
      for etype, eids in (out.edge if hetero else {HOMO_EDGE_TYPE: out.edge}).items():
        key = None
        if hetero:  # features are stored by the graph's edge type
          key = reverse_edge_type(etype) if self.edge_dir == 'out' else etype
          if key not in self.data.edge_features:
            continue
        fut = wrap_torch_future(self.dist_edge_feature.async_get(eids, key))
        pending.append((edge_feats, etype, fut))
    if self.collect_features:
      for ntype, ids in nodes.items():
        label = self.data.gather_node_labels(ids, ntype if hetero else None)
        if label is not None:
          labels[ntype] = label
    for target, key, fut in pending:
      target[key] = await fut
    return to_message(out, node_feats, labels, edge_feats)

  # -- public sampling -------------------------------------------------------

  async def _sample_from_nodes(self, inputs: NodeSamplerInput) -> SampleMessage:
    if self.sampler.is_hetero:
      ntype = inputs.input_type
      if ntype is None:
        raise ValueError('the graph is heterogeneous: NodeSamplerInput needs an input_type')
    else:
      ntype = HOMO_NODE_TYPE
    seeds = self.sampler._check_seeds(inputs.node, ntype)
    res = await self._sample({ntype: seeds})
    out = self.sampler._to_output(res, inputs.input_type, {'seed_local': res.seed_local[ntype]})
    return await self._collect(out)

  async def _sample_from_edges(self, inputs: EdgeSamplerInput) -> SampleMessage:
    batch = self.sampler.link_batch(inputs)
    strict = None
    if batch.strict_negatives is not None:
      strict = await self._sample_negative(batch.etype, *batch.strict_negatives)
    seeds, parts = self.sampler.link_seeds(batch, strict)
    res = await self._sample(seeds)
    return await self._collect(self.sampler.link_output(batch, res, parts))

  def sample_coroutine(self, sampling_type: SamplingType, inputs):
    r"""The coroutine that samples one batch of ``inputs`` (seed nodes for
    NODE and SUBGRAPH, seed edges for LINK)."""
    if sampling_type == SamplingType.NODE:
      return self._sample_from_nodes(NodeSamplerInput.cast(inputs))
    if sampling_type == SamplingType.LINK:
      return self._sample_from_edges(EdgeSamplerInput.cast(inputs))
    if sampling_type == SamplingType.SUBGRAPH:
      return self._subgraph(NodeSamplerInput.cast(inputs))
    raise ValueError(f'{sampling_type} sampling is not supported')

  def sample_from_nodes(
    self, inputs: NodeSamplerInput, timeout: Optional[float] = None, **kwargs
  ) -> Optional[SampleMessage]:
    r"""Samples the neighborhood of ``inputs`` across partitions.

    With a channel, the batch is sent there when done and this returns None
    once the batch is in flight; else it waits and returns the batch as a
    message (see ``distributed.message``).

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
