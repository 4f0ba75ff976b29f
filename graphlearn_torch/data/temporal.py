"""Times for temporal sampling: checked time arrays, each topology entry's
time, and the time-sorted copy of a topology the temporal kernel reads.

Temporal sampling (PyG's ``time_attr``) lets a seed of time ``t`` reach only
the past: with node-level time, neighbors of time <= t; with edge-level
time, edges of time <= t. Both come down to one time per topology entry
(the neighbor's, or the edge's own), by which each row is sorted, so that
the entries a seed may take are a prefix of the row, found by binary search
in the draw (``glt::sample_neighbors_temporal``).
"""

from typing import Optional

import torch

from ..utils.huge_pages import gathered
from ..utils.tensor import convert_to_tensor
from ..utils.times import checked_time
from .graph import Topology


def checked_times(times, what: str):
  """``checked_time`` of one time array, or of each of a dict of them by
  type (a dataset's ``init_node_time`` / ``init_edge_time``).

  Args:
    times: a time array, or a dict of them by node or edge type.
    what: their name, for the errors.
  """
  if isinstance(times, dict):
    return {k: checked_time(convert_to_tensor(v), f'{what} of {k!r}') for k, v in times.items()}
  return checked_time(convert_to_tensor(times), what)


def entry_time(
  topo: Topology,
  node_time: Optional[torch.Tensor] = None,
  edge_time: Optional[torch.Tensor] = None,
) -> torch.Tensor:
  """The time of each stored entry of ``topo``: its neighbor's time
  (node-level time: ``node_time`` of the column side's nodes) or its edge's
  (edge-level: ``edge_time`` indexed by edge id). Exactly one is given,
  checked (``checked_time``).

  Args:
    topo: the topology.
    node_time: a time per node of the topology's column side.
    edge_time: a time per edge id.
  """
  if (node_time is None) == (edge_time is None):
    raise ValueError('give either node_time or edge_time')
  if node_time is not None:
    if node_time.numel() < topo.col_count:
      raise ValueError(
        f'node_time has {node_time.numel()} entries for {topo.col_count} neighbor nodes'
      )
    return node_time.index_select(0, topo.indices)
  if topo.edge_count and int(topo.edge_ids.max()) >= edge_time.numel():
    raise ValueError(
      f'edge_time has {edge_time.numel()} entries, but edge ids reach {int(topo.edge_ids.max())}'
    )
  return edge_time[topo.edge_ids]


def time_sorted(topo: Topology, time: torch.Tensor, is_sorted: bool = False) -> Topology:
  """The topology with each row's entries sorted by time (ties in stored
  order: by neighbor id) and ``edge_time`` set: the copy the temporal kernel
  reads. A topology whose rows are in time order already shares its tensors
  with the copy.

  Args:
    topo: the topology (rows sorted by neighbor id).
    time: each stored entry's time (``entry_time``).
    is_sorted: the caller says the rows are in time order already (PyG's
      ``is_sorted``); a row that is not raises instead of being sorted.
  """
  if time.numel() != topo.edge_count:
    raise ValueError(f'{time.numel()} entry times for {topo.edge_count} entries')
  order, first_unsorted = torch.ops.glt.sort_rows_by_key(topo.indptr, time)
  if first_unsorted < 0:
    return topo.with_entry_time(time)
  if is_sorted:
    raise ValueError(
      f'is_sorted=True, but the neighbors of row {first_unsorted} are not sorted by time'
    )
  return topo.with_entry_time(gathered(time, order), order)
