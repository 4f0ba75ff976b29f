"""Disjoint sampling's node keys: every seed grows a subgraph of its own, so
the engine's inducer must tell apart a node met from two seeds."""

from typing import Dict, Optional, Tuple

import torch

from ..typing import NodeType
from .schema import SamplingSchema


class DisjointKeys:
  """Disjoint sampling's node keys: every seed grows a subgraph of its own,
  so a node met from two seeds is two nodes. The inducer tells them apart by
  key: ``seed * num_nodes + id``, where ``seed`` numbers the batch's seeds
  over their types in input order (PyG's numbering). In temporal sampling
  every key also carries its seed's time.

  Args:
    schema: the graph's types and sizes.
    seed_dict: the batch's seeds by node type, in input order.
    seed_time: the seeds' times by node type (temporal sampling), or None.
  """

  def __init__(self, schema: SamplingSchema, seed_dict: Dict[NodeType, torch.Tensor], seed_time):
    self.num_nodes = {t: max(int(schema.num_nodes[t]), 1) for t in schema.node_types}
    num_seeds = sum(s.numel() for s in seed_dict.values())
    largest = max(self.num_nodes.values(), default=1)
    if num_seeds * largest >= 2**63:
      raise ValueError(
        f'disjoint sampling of {num_seeds} seeds over {largest} nodes overflows its int64 keys'
      )
    self.seed_keys: Dict[NodeType, torch.Tensor] = {}
    offset = 0
    for t, seeds in seed_dict.items():
      index = torch.arange(offset, offset + seeds.numel(), device=seeds.device)
      self.seed_keys[t] = index * self.num_nodes[t] + seeds
      offset += seeds.numel()
    self.time = None
    if seed_time is not None:
      self.time = torch.cat([seed_time[t] for t in seed_dict]) if seed_dict else None

  def split(self, ntype: NodeType, keys: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(node ids, seed index)`` of keys of ``ntype``."""
    n = self.num_nodes[ntype]
    return keys % n, torch.div(keys, n, rounding_mode='floor')

  def keys(self, ntype: NodeType, ids: torch.Tensor, seed_index: torch.Tensor) -> torch.Tensor:
    """The keys of nodes ``ids`` of ``ntype`` in the subgraphs of ``seed_index``."""
    return seed_index * self.num_nodes[ntype] + ids

  def seed_time(self, seed_index: torch.Tensor) -> Optional[torch.Tensor]:
    """The time of each of ``seed_index``'s seeds (None: not temporal)."""
    return None if self.time is None else self.time[seed_index]
