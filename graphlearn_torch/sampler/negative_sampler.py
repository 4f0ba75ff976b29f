"""Random negative sampling: node pairs that are not edges of a graph."""

from typing import Literal, Optional

import torch

from ..data.graph import Graph
from .schema import SEED_BOUND


class RandomNegativeSampler:
  """Draws (src, dst) pairs that are not edges of ``graph``.

  Strict: a pair is checked against the graph (binary search in the sorted
  neighbor list) and redrawn up to ``trials_num`` times.

  Args:
    graph: the graph (one edge type).
    mode: the graph mode (the CPU kernels serve every mode for now).
    edge_dir: the sampler's edge_dir, which tells how the graph is stored:
      'out' (CSR over sources) or 'in' (CSC over destinations).
    generator: the random generator (default: torch's global one).
  """

  def __init__(
    self,
    graph: Graph,
    mode: str = 'CUDA',
    edge_dir: Literal['in', 'out'] = 'out',
    generator: Optional[torch.Generator] = None,
  ):
    self.graph = graph
    self.mode = mode
    self.edge_dir = edge_dir
    self._generator = generator

  def _rng_seed(self) -> int:
    return int(torch.randint(0, SEED_BOUND, (1,), generator=self._generator))

  def sample(
    self,
    req_num: int,
    trials_num: int = 5,
    padding: bool = False,
    src: Optional[torch.Tensor] = None,
    rng_seed: Optional[int] = None,
  ) -> torch.Tensor:
    """Returns a ``[2, n]`` tensor of (src, dst) non-edges.

    Args:
      req_num: how many pairs to draw (ignored when ``src`` is given).
      trials_num: tries per pair before giving up on it.
      padding: keep a pair whose tries all hit edges (so exactly ``req_num``
        come back, a few of them possibly edges); otherwise drop it.
      src: fixed source nodes, one pair each.
      rng_seed: the kernel's random seed (default: drawn from the sampler's
        generator).
    """
    if trials_num < 1:
      raise ValueError(f'trials_num must be >= 1, got {trials_num}')
    placed = self.graph.device_topology()  # on the graph's sampling device
    # CSR rows are sources; CSC rows are destinations.
    fixed_is_row = self.edge_dir == 'out'
    rows, cols = torch.ops.glt.sample_negative(
      placed.indptr,
      placed.indices,
      src.to(placed.indptr.device) if src is not None else None,
      fixed_is_row,
      self.graph.col_count,
      int(req_num),
      int(trials_num),
      bool(padding),
      self._rng_seed() if rng_seed is None else int(rng_seed),
    )
    if self.edge_dir == 'in':
      rows, cols = cols, rows
    return torch.stack([rows, cols])
