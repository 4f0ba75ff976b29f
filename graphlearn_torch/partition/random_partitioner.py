"""RandomPartitioner: nodes spread evenly and at random over partitions."""

from typing import Dict, Optional

import torch

from ..typing import NodeType
from .partitioner import PartitionerBase


def even_random_assignment(num_nodes: int, num_parts: int, generator: torch.Generator):
  """A partition id per node: a random permutation cut into equal chunks."""
  pb = torch.empty(num_nodes, dtype=torch.int64)
  perm = torch.randperm(num_nodes, generator=generator)
  for p, chunk in enumerate(torch.tensor_split(perm, num_parts)):
    pb[chunk] = p
  return pb


class RandomPartitioner(PartitionerBase):
  """Assigns each node to a partition at random, with equal node counts.

  Args: those of PartitionerBase, and
    seed: the random seed (default: drawn from torch's generator).
  """

  name = 'random'

  def __init__(self, *args, seed: Optional[int] = None, **kwargs):
    super().__init__(*args, **kwargs)
    self.seed = int(torch.randint(0, 2**62, ()).item()) if seed is None else int(seed)

  def _assign_nodes(self) -> Dict[NodeType, torch.Tensor]:
    g = torch.Generator().manual_seed(self.seed)
    return {t: even_random_assignment(n, self.num_parts, g) for t, n in self.num_nodes.items()}
