"""Arrays the sampler reads at random (a topology's entries, their edge ids,
weights and times), placed on 2 MB pages where Linux gives them: a random
read of an array far past the TLB's reach then rarely costs a page walk.
The CPU kernels place what they build themselves (``coo_to_csr``'s outputs,
the inducer's id-indexed maps) the same way."""

import torch

from .._ext import ops


def converted(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
  """``values`` as a 1-D tensor of ``dtype``, on huge pages where on the CPU.

  Args:
    values: the tensor to copy.
    dtype: the copy's dtype.
  """
  if values.device.type != 'cpu':
    return values.reshape(-1).to(dtype)
  out = ops.empty_huge_pages(values.numel(), dtype)
  out.copy_(values.reshape(-1))
  return out


def gathered(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
  """``values[index]`` for a 1-D tensor ``values``, on huge pages where on
  the CPU.

  Args:
    values: the tensor to read.
    index: the positions to read, int64.
  """
  if values.device.type != 'cpu' or index.device.type != 'cpu':
    return values[index]
  out = ops.empty_huge_pages(index.numel(), values.dtype)
  return torch.index_select(values, 0, index, out=out)
