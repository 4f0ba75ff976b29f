"""A batch's hops drawn and relabelled in one inducer call.

On a GPU the inducer can take every hop of a batch at once
(``CudaInducer.sample_batch``): the frontiers, sizes and random keys stay on
the device and the host waits once, at the batch's end, rather than once a
hop. The plan it gets is every (hop, edge type) the fanouts ask for; a
request whose frontier turns out empty draws nothing and takes no kernel
seed, so the batch equals the hop-by-hop engine's for the same stream.
With a host's partitions (``LocalDraws.partitions``) each seed draws from
its partition's topology, as the distributed sampler's hops on one host do.
From the second batch of a shape on (its seed counts, fanouts and
topologies), the CUDA inducer replays a CUDA graph of that shape's launches
(csrc/cuda/batch_graphs.h): one launch a batch rather than some forty.
"""

import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple

import torch

from ..typing import NodeType
from .base import HopResult
from .hops import LocalDraws
from .schema import KernelSeedsAhead, SamplingSchema

# GLT_CUDA_GRAPHS=0 launches every batch's kernels one by one rather than
# replaying a CUDA graph of its shape.
CUDA_GRAPHS_ENV = 'GLT_CUDA_GRAPHS'


def replays_cuda_graphs() -> bool:
  """Whether GPU batches replay CUDA graphs (``$GLT_CUDA_GRAPHS``, default on)."""
  return os.environ.get(CUDA_GRAPHS_ENV, '1') != '0'


def draws_whole_batch(inducer, fanouts: Dict, local: LocalDraws) -> bool:
  """Whether ``inducer`` can draw a whole batch from ``local`` in one call:
  it has ``sample_batch`` and every fanout has a bound (no -1)."""
  if local is None or not hasattr(inducer, 'sample_batch'):
    return False
  return all(k >= 0 for fanout in fanouts.values() for k in fanout)


@dataclass
class WholeBatch:
  """A batch's ``sample_batch`` call (or ``launch_batch``): its plan's
  arguments, the kernel seeds drawn ahead for it, and what turns the
  inducer's outputs into the batch's HopResult.

  Args:
    schema: the graph's types and sizes.
    num_hops: the hops drawn.
    requests: the plan's (hop, edge type, fanout) in order.
    args: the inducer call's keyword arguments.
    ahead: the kernel seeds drawn ahead, a request each.
    seed_types: the node types of the batch's seeds.
    with_edge: the batch has edge ids.
  """

  schema: SamplingSchema
  num_hops: int
  requests: List[Tuple]
  args: Dict
  ahead: KernelSeedsAhead
  seed_types: List[NodeType]
  with_edge: bool

  def failed(self) -> None:
    """The batch failed: it takes no kernel seed."""
    self.ahead.keep(0)

  def result(self, outputs: Tuple) -> HopResult:
    """The HopResult of the inducer's outputs for this batch."""
    schema, num_hops = self.schema, self.num_hops
    nodes, rows, cols, eids, seed_locals, counts = outputs
    counts = counts.tolist()
    self.ahead.keep(counts[-1])
    types = schema.node_types
    marks = len(types) * (num_hops + 1)
    out_etypes = [schema.out_edge_type(e) for e in schema.edge_types]
    num_edges = {key: [0] * num_hops for key in out_etypes}
    for (hop, etype, _), total in zip(self.requests, counts[marks:-1]):
      num_edges[schema.out_edge_type(etype)][hop] = total
    # The inducer's rows are each edge's seed, its cols the neighbor: the
    # output's col and row (messages pass neighbor -> seed).
    return HopResult(
      node=dict(zip(types, nodes)),
      row=dict(zip(out_etypes, cols)),
      col=dict(zip(out_etypes, rows)),
      edge=dict(zip(out_etypes, eids)) if self.with_edge else None,
      num_sampled_nodes={
        t: hop_sizes(counts[i * (num_hops + 1) : (i + 1) * (num_hops + 1)])
        for i, t in enumerate(types)
      },
      num_sampled_edges=num_edges,
      seed_local={t: seed_locals[schema.type_index[t]] for t in self.seed_types},
    )


def whole_batch(
  schema: SamplingSchema,
  fanouts: Dict,
  num_hops: int,
  seed_dict: Dict[NodeType, torch.Tensor],
  local: LocalDraws,
  device: torch.device,
) -> WholeBatch:
  """The ``sample_batch`` call that draws every hop of a batch from ``local``.

  Args:
    schema: the graph's types and sizes.
    fanouts: neighbors per hop by edge type (each >= 0).
    num_hops: the hops to draw.
    seed_dict: checked seed ids by node type, on the inducer's device.
    local: the topologies and the random stream to draw with.
    device: the inducer's device.
  """
  types = schema.node_types
  etypes = list(schema.edge_types)
  plan = [
    (hop, etype, fanout[hop])
    for hop in range(num_hops)
    for etype, fanout in fanouts.items()
    if fanout[hop] != 0
  ]
  # a kernel seed a request; the batch says how many requests drew
  ahead = local.random.kernel_seeds_ahead(len(plan))
  topos, keys = request_topologies(plan, local, ahead.seeds)
  empty = torch.empty(0, dtype=torch.int64, device=device)
  args = dict(
    seeds=[seed_dict.get(t, empty) for t in types],
    num_nodes=[schema.num_nodes[t] for t in types],
    num_hops=num_hops,
    num_edge_types=len(etypes),
    hops=[hop for hop, _, _ in plan],
    edge_types=[etypes.index(etype) for _, etype, _ in plan],
    src_types=[schema.type_index[schema.seed_type(etype)] for _, etype, _ in plan],
    nbr_types=[schema.type_index[schema.nbr_type(etype)] for _, etype, _ in plan],
    indptrs=[t.indptr for t in topos],
    indices=[t.indices for t in topos],
    edge_ids=[t.edge_ids if local.with_edge else None for t in topos],
    edge_weights=[t.edge_weights if local.with_weight else None for t in topos],
    fanouts=[fanout for _, _, fanout in plan],
    replace=local.replace,
    rng_seeds=keys,
    replay=replays_cuda_graphs(),
    **partition_args(local, types),
  )
  return WholeBatch(schema, num_hops, plan, args, ahead, list(seed_dict), local.with_edge)


def sample_whole_batch(
  schema: SamplingSchema,
  fanouts: Dict,
  num_hops: int,
  inducer,
  seed_dict: Dict[NodeType, torch.Tensor],
  local: LocalDraws,
  device: torch.device,
) -> HopResult:
  """Every hop of a batch drawn from ``local`` by ``inducer.sample_batch``
  (emptied by it first); the other arguments: ``whole_batch``'s."""
  batch = whole_batch(schema, fanouts, num_hops, seed_dict, local, device)
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


def request_topologies(
  plan: List[Tuple], local: LocalDraws, seeds: List[int]
) -> Tuple[List, List[int]]:
  """The topologies of ``plan``'s requests and their kernel seeds (from
  ``seeds``, one a request), one of each per request, or per request and
  partition (partition ``p`` of request ``r`` at ``r * P + p``) where
  ``local`` draws from a host's partitions."""
  parts = local.partitions
  if parts is None:
    return [local.topologies[etype] for _, etype, _ in plan], seeds
  num = parts.num_partitions
  topos = [parts.topologies[p][etype] for _, etype, _ in plan for p in range(num)]
  return topos, [parts.partition_seed(seed, p) for seed in seeds for p in range(num)]


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
