"""What peers ask of a partition over RPC: the callees a ``PartitionService``
registers (one hop, a temporal hop, its other steps), the split of a
request by the partitions that own its ids, and the stitching of the
answers of several partitions into one hop in seed order."""

from dataclasses import dataclass, field
from typing import List, Tuple

import torch

from ...partition.partition_book import PartitionBook
from ...sampler.base import NeighborOutput
from ...sampler.hops import PieceDraws
from ...sampler.schema import mix_seed
from ...typing import EdgeType, NodeType
from ...utils.device import to_device_async, to_host_at_once
from ..runtime.rpc import RpcCalleeBase


def split_by_owner(
  book: PartitionBook, tensors: Tuple[torch.Tensor, ...], num_partitions: int
) -> Tuple[List[torch.Tensor], List[Tuple[torch.Tensor, ...]]]:
  r"""The positions of the ids ``tensors[0]`` by the partition that owns
  them, and each partition's piece of ``tensors``, on the host, where the
  pieces for peers are sent from (RPC sends host tensors): a GPU's tensors
  leave it together, one host sync (``stitch_neighbors`` moves what comes
  back).

  Args:
    book: the ids' partition book.
    tensors: the ids, then what goes with each (their times).
    num_partitions: how many partitions.
  """
  tensors = to_host_at_once(list(tensors))
  positions, owned = book.lookup_on(torch.device('cpu')).group(tensors[0], num_partitions)
  pieces = [
    (owned[p], *(t.index_select(0, pos) for t in tensors[1:])) for p, pos in enumerate(positions)
  ]
  return positions, pieces


@dataclass
class OwnersAsked:
  r"""A request split by the partitions that own its ids
  (``PartitionService.ask_owners``): each partition's positions (on the
  host) and piece, the partitions whose steps run here, and the answers
  to come from the others.

  Args:
    positions: each partition's positions among the ids.
    pieces: each partition's piece of the request's tensors, on the host.
    here: the owners whose steps run in this process.
    away: ``(partition, worker, future answer)`` of the others.
  """

  positions: List[torch.Tensor]
  pieces: List[Tuple[torch.Tensor, ...]]
  here: List[int]
  away: List[tuple] = field(default_factory=list)

  async def answers(self) -> List[Tuple[torch.Tensor, object]]:
    r"""``(positions, answer)`` of each partition asked, as they come;
    raises naming the first that failed."""
    parts = []
    for p, worker, fut in self.away:
      try:
        parts.append((self.positions[p], await fut))
      except Exception as e:
        raise RuntimeError(
          f'partition {p} ({worker}) failed to answer: {type(e).__name__}: {e}'
        ) from e
    return parts


async def hop_pieces(
  service, seed_type: NodeType, seeds: torch.Tensor, fanout: int, etype: EdgeType,
  with_edge: bool, with_weight: bool, hop_seed: int,
) -> PieceDraws:  # fmt: skip
  r"""One hop from ``seeds`` (on the host), answered for an inducer on a
  GPU to draw (``PieceDraws``): the seeds of partitions whose steps run
  here are drawn there by the inducer, from their topologies with their
  kernel seeds, as ``sample_neighbors`` draws them; the others' are asked
  of their partitions over RPC first, and their answers given, stitched in
  seed order on the host. Nothing is read from the GPU.

  Args:
    service: this process's ``PartitionService``.
    seed_type: the seeds' node type.
    seeds: the seeds, on the host.
    fanout: neighbors per seed (>= 0).
    etype: the edge type.
    with_edge: return the sampled edges' ids.
    with_weight: draw proportionally to edge weights.
    hop_seed: the hop's random seed (partition ``p`` draws with
      ``mix_seed(hop_seed, p)``).
  """
  args = (fanout, etype, with_edge, with_weight, hop_seed)  # RpcSamplingCallee's
  asked = service.ask_owners(seed_type, (seeds,), service.sampling_callee, *args)
  drawn = [service.partition_idx] + [p for p in asked.here if p != service.partition_idx]
  part = torch.full((seeds.numel(),), len(drawn), dtype=torch.int32)
  for k, p in enumerate(drawn):
    part[asked.positions[p]] = k
  given = None
  if asked.away:
    given = stitch_neighbors(seeds.numel(), await asked.answers(), with_edge)
  return PieceDraws(
    topologies=[service.topology(etype, p) for p in drawn],
    rng_seeds=[mix_seed(hop_seed, p) for p in drawn],
    part=part,
    given=given,
    with_edge=with_edge,
    with_weight=with_weight,
  )


def stitch_neighbors(
  num_seeds: int,
  parts: List[Tuple[torch.Tensor, NeighborOutput]],
  with_edge: bool,
  device: torch.device = torch.device('cpu'),
) -> NeighborOutput:
  r"""One NeighborOutput in seed order from per-partition pieces, on
  ``device`` (the seeds' and their positions').

  Args:
    num_seeds: seeds of the hop.
    parts: ``(positions of its seeds, their NeighborOutput)`` per partition
      (a peer's on the CPU, as RPC brings it, and positions on the host:
      moved to ``device``).
    with_edge: whether the pieces carry edge ids.
    device: where the output goes.
  """
  if not parts:
    empty = torch.empty(0, dtype=torch.int64, device=device)
    return NeighborOutput(empty, empty, empty if with_edge else None)
  if len(parts) == 1 and parts[0][0].numel() == num_seeds:
    pos, out = parts[0]
    if bool((pos == torch.arange(num_seeds, device=pos.device)).all()):  # on the host: no sync
      return out.to(device, non_blocking=True)
  if torch.device(device).type == 'cuda':
    return stitched_on_gpu(num_seeds, parts, with_edge, device)
  nbr, nbr_num, edge = torch.ops.glt.stitch_neighbors(
    num_seeds,
    [pos for pos, _ in parts],
    [out.nbr_num for _, out in parts],
    [out.nbr for _, out in parts],
    [out.edge for _, out in parts] if with_edge else [],
  )
  return NeighborOutput(nbr, nbr_num, edge)


def check_host_piece(j: int, out: NeighborOutput) -> None:
  r"""Raises ValueError where piece ``j``'s counts (on the host) are
  negative or do not add up to its neighbors, as the stitch_neighbors op
  names them."""
  if bool((out.nbr_num < 0).any()):
    raise ValueError(f'stitch_neighbors: piece {j} has a negative count')
  total = int(out.nbr_num.sum())
  if total != out.nbr.numel():
    raise ValueError(
      f"stitch_neighbors: piece {j}'s counts sum to {total} but it has {out.nbr.numel()} neighbors"
    )


def stitched_on_gpu(
  num_seeds: int,
  parts: List[Tuple[torch.Tensor, NeighborOutput]],
  with_edge: bool,
  device: torch.device,
) -> NeighborOutput:
  r"""``stitch_neighbors`` on a GPU without a host sync: the positions (a
  partition of the seeds, on the host) and the pieces that come from the
  host (a peer's, from RPC) are checked there, the pieces drawn on the GPU
  are as its kernels made them; every size is known on the host, and each
  output neighbor is gathered from its piece in one pass."""
  for j, (pos, out) in enumerate(parts):
    if not pos.is_cpu:
      raise ValueError('stitched_on_gpu takes the positions on the host')
    if out.nbr_num.is_cpu:
      check_host_piece(j, out)
  positions = torch.cat([pos for pos, _ in parts])
  if positions.numel() and (int(positions.min()) < 0 or int(positions.max()) >= num_seeds):
    raise ValueError(f'stitch_neighbors: a piece names a seed outside [0, {num_seeds})')
  if positions.numel() and int(torch.bincount(positions, minlength=num_seeds).max()) > 1:
    raise ValueError('stitch_neighbors: a seed is in two places')
  # The pieces end to end (those from the host go to the GPU without a sync).
  pos = to_device_async(positions, device)
  num = torch.cat([to_device_async(out.nbr_num, device) for _, out in parts])
  nbr = torch.cat([to_device_async(out.nbr, device) for _, out in parts])
  edge = torch.cat([to_device_async(out.edge, device) for _, out in parts]) if with_edge else None
  # Each seed's count and where its run starts, in the output and among
  # the pieces' neighbors end to end.
  nbr_num = torch.zeros(num_seeds, dtype=num.dtype, device=device).index_copy_(0, pos, num)
  out_start = torch.cumsum(nbr_num, 0) - nbr_num
  piece_start = torch.zeros_like(nbr_num).index_copy_(0, pos, torch.cumsum(num, 0) - num)
  total = nbr.numel()
  source = torch.arange(total, device=device) + torch.repeat_interleave(
    piece_start - out_start, nbr_num, output_size=total
  )
  return NeighborOutput(
    nbr.index_select(0, source), nbr_num, edge.index_select(0, source) if with_edge else None
  )


class RpcSamplingCallee(RpcCalleeBase):
  r"""Samples one hop from this partition's seeds for a peer.

  Args:
    service: this process's ``PartitionService``.
  """

  def __init__(self, service):
    self.service = service

  def call(
    self, seeds, fanout, etype, with_edge=False, with_weight=False, hop_seed=None
  ) -> NeighborOutput:
    service = self.service
    rng_seed = None if hop_seed is None else mix_seed(hop_seed, service.partition_idx)
    return service.sample_one_hop(seeds, fanout, etype, with_edge, with_weight, rng_seed)


class RpcTemporalSamplingCallee(RpcCalleeBase):
  r"""Samples one temporal hop from this partition's seeds for a peer.

  Args:
    service: this process's ``PartitionService``.
  """

  def __init__(self, service):
    self.service = service

  def call(
    self, seeds, seed_time, fanout, etype, with_edge, with_weight, hop_seed, time_attr, last
  ) -> NeighborOutput:
    service = self.service
    rng_seed = mix_seed(hop_seed, service.partition_idx)
    return service.sample_one_hop(
      seeds, fanout, etype, with_edge, with_weight, rng_seed, None, seed_time, time_attr, last
    )


class RpcMethodCallee(RpcCalleeBase):
  r"""Runs one of the service's local steps for a peer (an edge check, the
  edges among a peer's nodes)."""

  def __init__(self, method):
    self.method = method

  def call(self, *args):
    return self.method(*args)
