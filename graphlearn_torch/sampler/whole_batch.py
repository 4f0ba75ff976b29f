"""A batch's hops drawn and relabelled in one inducer call.

The inducer can take every hop of a batch at once (``sample_batch``): on a
GPU (``CudaInducer``) the frontiers, sizes and random keys stay on the
device and the host waits once, at the batch's end, rather than once a hop;
on the CPU (``Inducer``) the hops run one after the other in C++, so that a
batch costs one call from Python rather than one a hop. The plan it gets is
every (hop, edge type) the fanouts ask for, made once for the batches of
the same topologies (``WholeBatchPlan``: a batch then passes its seeds and
random keys alone); a request whose frontier turns out empty draws nothing
and takes no kernel seed, so the batch equals the hop-by-hop engine's for
the same stream. With a host's partitions (``LocalDraws.partitions``, on a
GPU) each seed draws from its partition's topology, as the distributed
sampler's hops on one host do. From the second batch of a shape on (its
seed counts, fanouts and topologies), the CUDA inducer replays a CUDA graph
of that shape's launches (csrc/cuda/batch_graphs.h): one launch a batch
rather than some forty.
"""

import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import torch

from ..typing import NodeType
from .base import HopResult
from .hops import HostPartitions, LocalDraws
from .schema import KernelSeedsAhead, RandomStream, SamplingSchema

# GLT_CUDA_GRAPHS=0 launches every batch's kernels one by one rather than
# replaying a CUDA graph of its shape.
CUDA_GRAPHS_ENV = 'GLT_CUDA_GRAPHS'


def replays_cuda_graphs() -> bool:
  """Whether GPU batches replay CUDA graphs (``$GLT_CUDA_GRAPHS``, default
  on; read when a sampler makes its whole-batch plan, at its first batch)."""
  return os.environ.get(CUDA_GRAPHS_ENV, '1') != '0'


def draws_whole_batch(inducer, fanouts: Dict, local: LocalDraws) -> bool:
  """Whether ``inducer`` can draw a whole batch from ``local`` in one call:
  it has ``sample_batch`` and every fanout has a bound (no -1)."""
  if local is None or not hasattr(inducer, 'sample_batch'):
    return False
  return all(k >= 0 for fanout in fanouts.values() for k in fanout)


@dataclass
class WholeBatchPlan:
  """What every batch drawn whole from the same topologies shares: the
  requests (every (hop, edge type) the fanouts ask for), the inducer's plan
  of them (``inducer.BatchPlan``, made once: a batch then hands the
  inducer only its seeds and random keys) and what the batches' results
  are read with.

  Args:
    schema: the graph's types and sizes.
    num_hops: the hops drawn.
    requests: the plan's (hop, edge type, fanout) in order.
    plan: the inducer's plan of the requests.
    partitions: the host's partitions drawn from, if any.
    with_edge: the batches have edge ids.
    empty: the seeds of a node type without any, on the inducer's device.
    held: the partitions and topologies the plan was made for, kept
      while it is (an engine knows its plan by their ids: ``plan_key``).
    replay: its batches replay CUDA graphs (``replays_cuda_graphs`` when
      the plan was made).
  """

  schema: SamplingSchema
  num_hops: int
  requests: List[Tuple]
  plan: object
  partitions: Optional[HostPartitions]
  with_edge: bool
  empty: torch.Tensor
  held: List
  replay: bool = True

  def __post_init__(self):
    schema = self.schema
    self.out_edge_types = [schema.out_edge_type(e) for e in schema.edge_types]
    self.request_out_types = [schema.out_edge_type(etype) for _, etype, _ in self.requests]

  @classmethod
  def of(
    cls,
    inducer,
    schema: SamplingSchema,
    fanouts: Dict,
    num_hops: int,
    local: LocalDraws,
    device: torch.device,
  ) -> 'WholeBatchPlan':
    """The plan that draws every hop of a batch from ``local``.

    Args:
      inducer: an inducer with ``sample_batch`` (its ``BatchPlan`` is made).
      schema: the graph's types and sizes.
      fanouts: neighbors per hop by edge type (each >= 0).
      num_hops: the hops to draw.
      local: the topologies to draw from.
      device: the inducer's device.
    """
    types = schema.node_types
    etypes = list(schema.edge_types)
    requests = [
      (hop, etype, fanout[hop])
      for hop in range(num_hops)
      for etype, fanout in fanouts.items()
      if fanout[hop] != 0
    ]
    topos = request_topologies(requests, local)
    plan = inducer.BatchPlan(
      num_nodes=[schema.num_nodes[t] for t in types],
      num_hops=num_hops,
      num_edge_types=len(etypes),
      hops=[hop for hop, _, _ in requests],
      edge_types=[etypes.index(etype) for _, etype, _ in requests],
      src_types=[schema.type_index[schema.seed_type(etype)] for _, etype, _ in requests],
      nbr_types=[schema.type_index[schema.nbr_type(etype)] for _, etype, _ in requests],
      indptrs=[t.indptr for t in topos],
      indices=[t.indices for t in topos],
      edge_ids=[t.edge_ids if local.with_edge else None for t in topos],
      edge_weights=[t.edge_weights if local.with_weight else None for t in topos],
      fanouts=[fanout for _, _, fanout in requests],
      replace=local.replace,
      **partition_args(local, types),
    )
    empty = torch.empty(0, dtype=torch.int64, device=device)
    held = [local.partitions] + [t for _, t in drawn_topologies(local)]
    return cls(
      schema,
      num_hops,
      requests,
      plan,
      local.partitions,
      local.with_edge,
      empty,
      held,
      replays_cuda_graphs(),
    )

  def batch(self, seed_dict: Dict[NodeType, torch.Tensor], random: RandomStream) -> 'WholeBatch':
    """The inducer call of one batch: its seeds and its kernel seeds, a
    request each, drawn from ``random`` (``keep``: those the batch took).

    Args:
      seed_dict: checked seed ids by node type, on the inducer's device.
      random: the batch's random stream.
    """
    ahead = random.kernel_seeds_ahead(len(self.requests))
    args = dict(
      plan=self.plan,
      seeds=[seed_dict.get(t, self.empty) for t in self.schema.node_types],
      rng_seeds=request_keys(self.partitions, ahead.seeds),
      replay=self.replay,
    )
    return WholeBatch(self, args, ahead, list(seed_dict))


def drawn_topologies(local: LocalDraws) -> List[Tuple]:
  """``(edge type, topology)`` of every topology ``local`` draws from: its
  own, or each partition's in turn."""
  parts = local.partitions
  by_part = [local.topologies] if parts is None else parts.topologies
  return [item for by_type in by_part for item in by_type.items()]


def plan_key(local: LocalDraws) -> Tuple:
  """What a whole-batch plan of ``local`` is made of: its topologies and
  partitions (by identity, in order), whether it reads edge ids and
  weights, replace."""
  ids = tuple((etype, id(t)) for etype, t in drawn_topologies(local))
  return ids, id(local.partitions), local.with_edge, local.with_weight, local.replace


class WholeBatchPlans:
  """An engine's whole-batch plan, made at its first batch and again when
  the topologies it draws from change (a graph placed anew): only the last
  is kept, so that the topologies it holds are those in use.

  Args:
    schema: the graph's types and sizes.
    fanouts: neighbors per hop by edge type (each >= 0).
    num_hops: the hops to draw.
    device: the inducers' device.
  """

  def __init__(self, schema: SamplingSchema, fanouts: Dict, num_hops: int, device: torch.device):
    self.schema, self.fanouts, self.num_hops, self.device = schema, fanouts, num_hops, device
    self._last: Optional[Tuple[Tuple, WholeBatchPlan]] = None

  def get(self, inducer, local: LocalDraws) -> WholeBatchPlan:
    """The plan of batches drawn from ``local`` by inducers like ``inducer``."""
    key = plan_key(local)
    last = self._last  # (one read: batches may run on several threads)
    if last is not None and last[0] == key:
      return last[1]
    plan = WholeBatchPlan.of(inducer, self.schema, self.fanouts, self.num_hops, local, self.device)
    self._last = (key, plan)
    return plan


@dataclass
class WholeBatch:
  """A batch's ``sample_batch`` call (or ``launch_batch``): its plan, the
  call's arguments, the kernel seeds drawn ahead for it, and what turns the
  inducer's outputs into the batch's HopResult.

  Args:
    plan: what the batches of its topologies share.
    args: the inducer call's keyword arguments.
    ahead: the kernel seeds drawn ahead, a request each.
    seed_types: the node types of the batch's seeds.
  """

  plan: WholeBatchPlan
  args: Dict
  ahead: KernelSeedsAhead
  seed_types: List[NodeType]

  def failed(self) -> None:
    """The batch failed: it takes no kernel seed."""
    self.ahead.keep(0)

  def result(self, outputs: Tuple) -> HopResult:
    """The HopResult of the inducer's outputs for this batch."""
    plan = self.plan
    schema, num_hops, out_etypes = plan.schema, plan.num_hops, plan.out_edge_types
    nodes, rows, cols, eids, seed_locals, counts = outputs
    counts = counts.tolist()
    self.ahead.keep(counts[-1])
    types = schema.node_types
    marks = len(types) * (num_hops + 1)
    num_edges = {key: [0] * num_hops for key in out_etypes}
    totals = counts[marks:-1]
    for (hop, _, _), out_type, total in zip(plan.requests, plan.request_out_types, totals):
      num_edges[out_type][hop] = total
    # The inducer's rows are each edge's seed, its cols the neighbor: the
    # output's col and row (messages pass neighbor -> seed).
    return HopResult(
      node=dict(zip(types, nodes)),
      row=dict(zip(out_etypes, cols)),
      col=dict(zip(out_etypes, rows)),
      edge=dict(zip(out_etypes, eids)) if plan.with_edge else None,
      num_sampled_nodes={
        t: hop_sizes(counts[i * (num_hops + 1) : (i + 1) * (num_hops + 1)])
        for i, t in enumerate(types)
      },
      num_sampled_edges=num_edges,
      seed_local={t: seed_locals[schema.type_index[t]] for t in self.seed_types},
    )


def sample_whole_batch(
  plan: WholeBatchPlan,
  inducer,
  seed_dict: Dict[NodeType, torch.Tensor],
  random: RandomStream,
) -> HopResult:
  """Every hop of a batch drawn by ``inducer.sample_batch`` (emptied by it
  first) as ``plan`` says, with kernel seeds from ``random``.

  Args:
    plan: the batch's whole-batch plan.
    inducer: an inducer with ``sample_batch``.
    seed_dict: checked seed ids by node type, on the inducer's device.
    random: the batch's random stream.
  """
  batch = plan.batch(seed_dict, random)
  try:
    outputs = inducer.sample_batch(**batch.args)
  except BaseException:
    batch.failed()
    raise
  return batch.result(outputs)


class LaunchedBatch:
  """A whole batch launched (``inducer.launch_batch``): the GPU draws it
  while the host goes on; ``finish`` waits for it and gives its HopResult.
  Either ``finish`` or ``discard`` hands the inducer back (``release``).

  Args:
    batch: the batch's call.
    inducer: the inducer that was launched.
    release: hands the inducer back to its pool.
  """

  def __init__(self, batch: WholeBatch, inducer, release: Callable[[], None]):
    self.batch = batch
    self.inducer = inducer
    self._release = release
    try:
      inducer.launch_batch(**batch.args)
    except BaseException:
      self._give_back(failed=True)
      raise

  def finish(self) -> HopResult:
    """Waits for the batch (its one host sync) and gives its HopResult."""
    self._check_open()
    try:
      outputs = self.inducer.finish_batch()
    except BaseException:
      self._give_back(failed=True)
      raise
    self._give_back(failed=False)
    return self.batch.result(outputs)

  def discard(self) -> None:
    """Drops the batch unread, if it is still launched: its inducer forgets
    it and goes back."""
    if self._release is not None:
      self.inducer.reset()
      self._give_back(failed=True)

  def _check_open(self) -> None:
    if self._release is None:
      raise RuntimeError('this launched batch was finished or discarded already')

  def _give_back(self, failed: bool) -> None:
    release, self._release = self._release, None
    if failed:
      self.batch.failed()
    release()


def request_topologies(requests: List[Tuple], local: LocalDraws) -> List:
  """The topologies of ``requests``, one per request, or per request and
  partition (partition ``p`` of request ``r`` at ``r * P + p``) where
  ``local`` draws from a host's partitions."""
  parts = local.partitions
  if parts is None:
    return [local.topologies[etype] for _, etype, _ in requests]
  num = parts.num_partitions
  return [parts.topologies[p][etype] for _, etype, _ in requests for p in range(num)]


def request_keys(parts: Optional[HostPartitions], seeds: List[int]) -> List[int]:
  """The random keys of a batch's requests from their kernel seeds
  ``seeds``: those, or one per request and partition (in
  ``request_topologies``' order) where the batch draws from a host's
  partitions ``parts``."""
  if parts is None:
    return seeds
  num = parts.num_partitions
  return [parts.partition_seed(seed, p) for seed in seeds for p in range(num)]


def partition_args(local: LocalDraws, types: List[NodeType]) -> Dict:
  """``sample_batch``'s partition arguments: none, or the partitions' count
  and each node type's book."""
  if local.partitions is None:
    return {}
  books = local.partitions.books
  return {'num_partitions': local.partitions.num_partitions, 'books': [books[t] for t in types]}


def hop_sizes(marks: List[int]) -> List[int]:
  """Nodes added in each hop (hop 0: the seeds) from a type's node count
  after the seeds and after each hop."""
  return [marks[0]] + [b - a for a, b in zip(marks, marks[1:])]
