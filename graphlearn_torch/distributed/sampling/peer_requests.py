"""What peers ask of a partition over RPC: the callees a ``PartitionService``
registers (one hop, a temporal hop, its other steps), and the stitching of
the answers of several partitions into one hop in seed order."""

from typing import List, Tuple

import torch

from ...sampler.base import NeighborOutput
from ...sampler.schema import mix_seed
from ...utils.device import to_device_async
from ..runtime.rpc import RpcCalleeBase


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
  # What comes from the host (a peer's piece, from RPC; the positions) goes
  # to a GPU without a host sync.
  parts = [(to_device_async(pos, device), out.to(device, non_blocking=True)) for pos, out in parts]
  nbr, nbr_num, edge = torch.ops.glt.stitch_neighbors(
    num_seeds,
    [pos for pos, _ in parts],
    [out.nbr_num for _, out in parts],
    [out.nbr for _, out in parts],
    [out.edge for _, out in parts] if with_edge else [],
  )
  return NeighborOutput(nbr, nbr_num, edge)


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
