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
(csrc/cuda/batch_graphs.h): one launch a batch rather than some fifty.
"""

import os
from typing import Dict, List, Tuple

import torch

from ..typing import NodeType
from .base import HopResult
from .hops import LocalDraws
from .schema import SamplingSchema

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


def sample_whole_batch(
  schema: SamplingSchema,
  fanouts: Dict,
  num_hops: int,
  inducer,
  seed_dict: Dict[NodeType, torch.Tensor],
  local: LocalDraws,
  device: torch.device,
) -> HopResult:
  """Every hop of a batch drawn from ``local`` by ``inducer.sample_batch``.

  Args:
    schema: the graph's types and sizes.
    fanouts: neighbors per hop by edge type (each >= 0).
    num_hops: the hops to draw.
    inducer: an inducer with ``sample_batch`` (emptied by it first).
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
  try:
    nodes, rows, cols, eids, seed_locals, counts = inducer.sample_batch(
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
  except BaseException:
    ahead.keep(0)  # a failed batch takes none
    raise
  counts = counts.tolist()
  ahead.keep(counts[-1])
  marks = len(types) * (num_hops + 1)
  out_etypes = [schema.out_edge_type(e) for e in etypes]
  num_edges = {key: [0] * num_hops for key in out_etypes}
  for (hop, etype, _), total in zip(plan, counts[marks:-1]):
    num_edges[schema.out_edge_type(etype)][hop] = total
  # The inducer's rows are each edge's seed, its cols the neighbor: the
  # output's col and row (messages pass neighbor -> seed).
  return HopResult(
    node=dict(zip(types, nodes)),
    row=dict(zip(out_etypes, cols)),
    col=dict(zip(out_etypes, rows)),
    edge=dict(zip(out_etypes, eids)) if local.with_edge else None,
    num_sampled_nodes={
      t: hop_sizes(counts[i * (num_hops + 1) : (i + 1) * (num_hops + 1)])
      for i, t in enumerate(types)
    },
    num_sampled_edges=num_edges,
    seed_local={t: seed_locals[schema.type_index[t]] for t in seed_dict},
  )


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
