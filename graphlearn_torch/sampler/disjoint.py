"""Disjoint sampling's node keys: every seed grows a subgraph of its own, so
the engine's inducer must tell apart a node met from two seeds."""

from typing import Dict, Optional, Tuple

import torch

from ..typing import NodeType
from .schema import SamplingSchema


class DisjointKeys:
  """The inducer keys a node of disjoint sampling by its seed and its id:
  ``(seed << bits) | id``, where ``seed`` numbers the batch's seeds over
  their types in input order (PyG's numbering) and ``bits`` holds the
  largest node type's ids. In temporal sampling every seed also has a time,
  which its subgraph's nodes carry on.

  Args:
    schema: the graph's types and sizes.
    seed_dict: the batch's seeds by node type, in input order.
    seed_time: the seeds' times by node type (temporal sampling), or None.
  """

  def __init__(
    self,
    schema: SamplingSchema,
    seed_dict: Dict[NodeType, torch.Tensor],
    seed_time: Optional[Dict[NodeType, torch.Tensor]],
  ):
    largest = max(schema.num_nodes.values(), default=1)
    self.bits = self.bits_of(schema)
    self.mask = (1 << self.bits) - 1
    num_seeds = sum(s.numel() for s in seed_dict.values())
    if num_seeds >= 2 ** (63 - self.bits):
      raise ValueError(
        f'disjoint sampling of {num_seeds} seeds over {largest} nodes overflows its int64 keys'
      )
    self.seed_keys: Dict[NodeType, torch.Tensor] = {}
    offset = 0
    for t, seeds in seed_dict.items():
      index = torch.arange(offset, offset + seeds.numel(), device=seeds.device)
      self.seed_keys[t] = (index << self.bits) | seeds
      offset += seeds.numel()
    self.time = None
    if seed_time is not None and seed_dict:
      self.time = torch.cat([seed_time[t] for t in seed_dict])

  @staticmethod
  def bits_of(schema: SamplingSchema) -> int:
    """The id bits of a schema's keys: enough for its largest node type."""
    return max(int(max(schema.num_nodes.values(), default=1) - 1).bit_length(), 1)

  def split(self, keys: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(node ids, seed index)`` of ``keys``."""
    return keys & self.mask, keys >> self.bits

  def neighbor_keys(
    self, seed_keys: torch.Tensor, nbrs: torch.Tensor, nbr_nums: torch.Tensor
  ) -> torch.Tensor:
    """The keys of one hop's neighbors (``nbr_nums[i]`` of them sampled for
    the node keyed ``seed_keys[i]``): in their seed's subgraph."""
    return torch.ops.glt.disjoint_keys(seed_keys, nbrs, nbr_nums, self.bits)

  def seed_time(self, seed_index: torch.Tensor) -> Optional[torch.Tensor]:
    """The time of each of ``seed_index``'s seeds (None: not temporal)."""
    return None if self.time is None else self.time[seed_index]
