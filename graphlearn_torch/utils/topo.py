"""COO to compressed layouts, as GLT's ``utils.topo`` (no torch-sparse needed)."""

from typing import Optional, Tuple

import torch

from .._ext import ops
from .memory import check_room_for_rows

CompressedEdges = Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]


def index_dtype(num_edges: int, num_cols: int) -> torch.dtype:
  """The dtype a Topology stores ``indptr`` and ``indices`` in: int32 when
  every entry fits (at most 2^31 - 1 edges and columns), else int64.

  Args:
    num_edges: the number of edges (``indptr``'s last entry).
    num_cols: the number of columns (``indices`` lie below it).
  """
  int32_max = torch.iinfo(torch.int32).max
  return torch.int32 if num_edges <= int32_max and num_cols <= int32_max else torch.int64


def ptr2ind(ptr: torch.Tensor) -> torch.Tensor:
  """The row of every entry of a compressed index pointer: ``[0, 2, 3]`` -> ``[0, 0, 1]``."""
  counts = ptr[1:] - ptr[:-1]
  return torch.repeat_interleave(torch.arange(counts.numel(), device=ptr.device), counts)


def lowest_time(dtype: torch.dtype):
  """The earliest time of ``dtype``: that of a row without entries."""
  return float('-inf') if dtype.is_floating_point else torch.iinfo(dtype).min


def row_max_times(indptr: torch.Tensor, time: torch.Tensor) -> torch.Tensor:
  """Each row's latest entry time, where each row's entries (``indptr``'s
  ranges of ``time``) are sorted by time: its last entry's; for an empty row,
  ``lowest_time``."""
  ends = indptr[1:].long()
  filled = ends > indptr[:-1].long()
  if time.device.type == 'cpu':  # read at random, once a seed
    out = ops.empty_huge_pages(ends.numel(), time.dtype).fill_(lowest_time(time.dtype))
  else:
    out = torch.full((ends.numel(),), lowest_time(time.dtype), dtype=time.dtype, device=time.device)
  out[filled] = time[ends[filled] - 1]
  return out


def coo_to_csr(
  row: torch.Tensor,
  col: torch.Tensor,
  edge_id: Optional[torch.Tensor] = None,
  edge_weight: Optional[torch.Tensor] = None,
  node_sizes: Optional[Tuple[int, int]] = None,
) -> CompressedEdges:
  """COO edges to CSR: ``(rowptr, col, edge_id, edge_weight)``, entries of a
  row sorted by column, ids and weights following their edges.

  Args:
    row: source ids.
    col: destination ids.
    edge_id: an id per edge (returned in CSR order; None stays None).
    edge_weight: a weight per edge (likewise).
    node_sizes: ``(num_rows, num_cols)``; by default the largest ids + 1.
  """
  row, col = row.to(torch.int64).contiguous(), col.to(torch.int64).contiguous()
  if row.numel() != col.numel():
    raise ValueError(f'row and col differ in length: {row.numel()} vs {col.numel()}')
  for name, t in (('edge_id', edge_id), ('edge_weight', edge_weight)):
    if t is not None and t.numel() != row.numel():
      raise ValueError(f'{name} has {t.numel()} entries for {row.numel()} edges')
  given = node_sizes is not None
  if not given:
    node_sizes = (
      int(row.max()) + 1 if row.numel() else 0,
      int(col.max()) + 1 if col.numel() else 0,
    )
  check_room_for_rows(int(node_sizes[0]), 'node_sizes' if given else 'the largest row id')
  rowptr, indices, perm = torch.ops.glt.coo_to_csr(row, col, int(node_sizes[0]), int(node_sizes[1]))
  return (
    rowptr,
    indices,
    edge_id[perm] if edge_id is not None else None,
    edge_weight[perm] if edge_weight is not None else None,
  )


def coo_to_csc(
  row: torch.Tensor,
  col: torch.Tensor,
  edge_id: Optional[torch.Tensor] = None,
  edge_weight: Optional[torch.Tensor] = None,
  node_sizes: Optional[Tuple[int, int]] = None,
) -> CompressedEdges:
  """COO edges to CSC: ``(row, colptr, edge_id, edge_weight)`` (GLT's order:
  indices first), entries of a column sorted by row.

  Args:
    row: source ids.
    col: destination ids.
    edge_id: an id per edge.
    edge_weight: a weight per edge.
    node_sizes: ``(num_rows, num_cols)``; by default the largest ids + 1.
  """
  sizes = (node_sizes[1], node_sizes[0]) if node_sizes is not None else None
  colptr, rows, eids, weights = coo_to_csr(col, row, edge_id, edge_weight, sizes)
  return rows, colptr, eids, weights
