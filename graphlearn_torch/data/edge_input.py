"""Edges as users give them (a COO ``[2, E]`` tensor or pair, or CSR/CSC
pointers and indices), checked and turned into int64 COO for ``Topology``."""

from typing import Tuple

import torch

from ..typing import TensorDataType
from ..utils.tensor import bounds, convert_to_tensor
from ..utils.topo import ptr2ind


def as_index(t: TensorDataType, name: str) -> torch.Tensor:
  """``t`` as a contiguous 1-D int64 tensor of ids named ``name`` in errors."""
  t = convert_to_tensor(t)
  if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
    raise ValueError(f'{name} must hold integer node ids, got dtype {t.dtype}')
  t = t.to(torch.int64)
  if t.dim() != 1:
    raise ValueError(f'{name} must be 1-D, got shape {tuple(t.shape)}')
  return t.contiguous()


def _split_edge_index(edge_index, layout: str) -> Tuple[torch.Tensor, torch.Tensor]:
  """Splits a [2, E] tensor or a pair of tensors into its two halves."""
  if isinstance(edge_index, (tuple, list)):
    if len(edge_index) != 2:
      raise ValueError(f'a {layout} edge_index pair must have 2 members, got {len(edge_index)}')
    first, second = edge_index
  else:
    edge_index = convert_to_tensor(edge_index)
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
      raise ValueError(
        f'edge_index must have shape [2, num_edges] (or be a pair of 1-D tensors), '
        f'got shape {tuple(edge_index.shape)}'
      )
    first, second = edge_index[0], edge_index[1]
  names = {'COO': ('row', 'col'), 'CSR': ('indptr', 'indices'), 'CSC': ('indices', 'indptr')}
  return as_index(first, names[layout][0]), as_index(second, names[layout][1])


def _id_count(ids: torch.Tensor, name: str) -> int:
  """The node count that ``ids`` (non-negative) need: the largest plus one."""
  if ids.numel() == 0:
    return 0
  low, high = bounds(ids)
  if low < 0:
    raise ValueError(f'edge_index holds a negative {name} id: {low}')
  return high + 1


def _check_ptr(indptr: torch.Tensor, indices: torch.Tensor, layout: str) -> None:
  if indptr.numel() == 0 or int(indptr[0]) != 0:
    raise ValueError(f'{layout} indptr must start at 0')
  if int(indptr[-1]) != indices.numel():
    raise ValueError(
      f'{layout} indptr ends at {int(indptr[-1])} but indices holds {indices.numel()} entries'
    )
  if bool((indptr[1:] < indptr[:-1]).any()):
    raise ValueError(f'{layout} indptr must be non-decreasing')


def coo_edges(edge_index, layout: str) -> Tuple[torch.Tensor, torch.Tensor, int, int]:
  """``(src, dst, num_src, num_dst)``: the edges as int64 COO, and the node
  counts their ids (and a CSR/CSC pointer's length) need.

  Args:
    edge_index: COO ``[2, E]`` tensor or ``(row, col)`` pair; for CSR
      ``(indptr, indices)``; for CSC ``(indices, indptr)``.
    layout: 'COO', 'CSR' or 'CSC'.
  """
  first, second = _split_edge_index(edge_index, layout)
  if layout == 'COO':
    if first.numel() != second.numel():
      raise ValueError(
        f'edge_index rows differ in length: {first.numel()} sources, {second.numel()} targets'
      )
    src, dst = first, second
  elif layout == 'CSR':
    _check_ptr(first, second, layout)
    src, dst = ptr2ind(first), second
  else:
    _check_ptr(second, first, layout)
    src, dst = first, ptr2ind(second)
  num_src, num_dst = _id_count(src, 'source'), _id_count(dst, 'destination')
  if layout == 'CSR':
    num_src = max(num_src, first.numel() - 1)
  elif layout == 'CSC':
    num_dst = max(num_dst, second.numel() - 1)
  return src, dst, num_src, num_dst
