"""Feature row reordering by degree (GLT's ``data.reorder``)."""

from typing import Optional, Tuple

import torch

from .graph import Topology


def sort_by_in_degree(
  cpu_tensor: torch.Tensor, shuffle_ratio: float, topo: Optional[Topology]
) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
  """Reorders the rows of a feature table hottest first: by the degree of
  each row of ``topo`` (in-degrees for a CSC topology), highest first.

  The first ``shuffle_ratio`` share of that order is randomly permuted among
  itself (so the hottest rows are spread rather than strictly sorted); rows
  beyond ``topo.row_count`` stay where they are.

  Args:
    cpu_tensor: the feature table, at least ``topo.row_count`` rows.
    shuffle_ratio: the share of the order, from the top, to permute (0 to 1).
    topo: the topology whose degrees rank the rows; None leaves the table as it is.

  Returns:
    ``(reordered table, old2new)`` with ``old2new[old row] = new row``;
    ``(cpu_tensor, None)`` when ``topo`` is None.
  """
  if topo is None:
    return cpu_tensor, None
  row_count = topo.row_count
  if cpu_tensor.size(0) < row_count:
    raise ValueError(
      f'the feature table has {cpu_tensor.size(0)} rows but the topology has {row_count}'
    )
  if not 0.0 <= shuffle_ratio <= 1.0:
    raise ValueError(f'shuffle_ratio must lie in [0, 1], got {shuffle_ratio}')
  order = torch.sort(topo.degrees, descending=True, stable=True).indices
  num_shuffled = int(row_count * shuffle_ratio)
  order[:num_shuffled] = order[:num_shuffled][torch.randperm(num_shuffled)]
  reordered = cpu_tensor.index_select(0, order)
  if row_count < cpu_tensor.size(0):
    reordered = torch.cat([reordered, cpu_tensor[row_count:]])
  old2new = torch.arange(cpu_tensor.size(0), dtype=torch.int64)
  old2new[order] = torch.arange(row_count, dtype=torch.int64)
  return reordered, old2new
