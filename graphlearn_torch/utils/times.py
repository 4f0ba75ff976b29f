"""Time arrays as temporal sampling's kernels take them (``checked_time``),
for the data, sampler and partition modules alike."""

from typing import Optional

import torch


def checked_time(time, what: str, length: Optional[int] = None) -> torch.Tensor:
  """A time array as the kernels take it: 1-D, int64 (from any integer
  dtype) or float64 (from any floating dtype), without NaN.

  Args:
    time: the times.
    what: what they are the times of, for the errors (e.g. "node_time of
      'user'").
    length: the number of entries it must have (None: any).

  Raises:
    ValueError: not a numeric 1-D array, the wrong length, or NaN.
  """
  time = torch.as_tensor(time)
  if time.dtype == torch.bool or time.is_complex():
    raise ValueError(f'{what} must hold integer or floating times, got {time.dtype}')
  if time.dim() != 1:
    raise ValueError(f'{what} must be 1-D, got shape {tuple(time.shape)}')
  if length is not None and time.numel() != length:
    raise ValueError(f'{what} has {time.numel()} entries, expected {length}')
  if time.is_floating_point():
    if bool(torch.isnan(time).any()):
      raise ValueError(f'{what} holds NaN at {int(torch.isnan(time).nonzero()[0])}')
    return time.to(torch.float64)
  return time.to(torch.int64)
