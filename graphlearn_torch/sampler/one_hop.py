"""One hop of neighbor sampling from a topology held here: the answer every
driver of the multi-hop engine gives a ``HopRequest`` it draws itself."""

from typing import Optional

import torch

from ..data.graph import DeviceTopology
from .base import NeighborOutput


def sample_one_hop(
  topo: DeviceTopology,
  seeds: torch.Tensor,
  fanout: int,
  rng_seed: int,
  with_edge: bool = False,
  with_weight: bool = False,
  replace: bool = False,
  seed_time: Optional[torch.Tensor] = None,
  last: bool = False,
) -> NeighborOutput:
  """One hop from a topology held here: up to ``fanout`` neighbors (-1: all)
  of each of ``seeds`` (rows of ``topo``), on the topology's device; with
  ``seed_time``, each seed only among the entries of time <= its time
  (``topo`` a time-sorted copy, ``data.temporal.time_sorted``).

  Args:
    topo: the edge type's topology where the kernels read it
      (``Graph.device_topology()``).
    seeds: row ids (moved to the topology's device).
    fanout: neighbors per seed, -1 for all.
    rng_seed: the kernel's random seed (each seed draws from its own stream).
    with_edge: return the sampled edges' ids.
    with_weight: draw proportionally to the edge weights.
    replace: draw with replacement.
    seed_time: each seed's time (temporal sampling), or None.
    last: temporal sampling takes the latest allowed entries ('last').
  """
  device = topo.indptr.device
  edge_ids = topo.edge_ids if with_edge else None
  weights = topo.edge_weights if with_weight else None
  if seed_time is None:
    nbr, nbr_num, eid = torch.ops.glt.sample_neighbors(
      topo.indptr, topo.indices, edge_ids, weights, seeds.to(device), int(fanout), replace, rng_seed
    )
  else:
    if topo.edge_time is None:
      raise ValueError('temporal sampling needs a time-sorted topology (data.temporal)')
    nbr, nbr_num, eid = torch.ops.glt.sample_neighbors_temporal(
      topo.indptr,
      topo.indices,
      edge_ids,
      weights,
      topo.edge_time,
      seeds.to(device),
      seed_time.to(device),
      int(fanout),
      replace,
      last,
      rng_seed,
      topo.row_max_time,
    )
  return NeighborOutput(nbr, nbr_num, eid if with_edge else None)
