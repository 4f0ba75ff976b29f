"""Tensor helpers."""

from typing import Any, Callable, Optional, Sequence, Tuple, Union

import numpy as np
import torch


def convert_to_tensor(data: Any, dtype: Optional[torch.dtype] = None) -> Any:
  """Converts a tensor-like value (or a dict of them) to ``torch.Tensor``.

  Args:
    data: a tensor, NumPy array, sequence, dict of those, or None.
    dtype: the dtype to cast to; None keeps the input's.
  """
  if data is None:
    return None
  if isinstance(data, dict):
    return {k: convert_to_tensor(v, dtype) for k, v in data.items()}
  if isinstance(data, (tuple, list)) and data and isinstance(data[0], (torch.Tensor, np.ndarray)):
    return type(data)(convert_to_tensor(v, dtype) for v in data)
  if isinstance(data, np.ndarray):
    data = torch.from_numpy(data if data.flags.writeable else np.array(data))
  elif not isinstance(data, torch.Tensor):
    data = torch.as_tensor(data)
  if dtype is not None and data.dtype != dtype:
    data = data.to(dtype)
  return data


def as_node_ids(data: Any, what: str) -> Any:
  """``data`` as int64 node ids: a tensor-like of ids, or a dict of them by
  node type. A boolean mask (PyG's ``train_mask``) becomes the positions it
  holds.

  Args:
    data: the ids, a mask, or None.
    what: what they are, for errors.

  Raises:
    ValueError: fractional or negative ids.
  """
  if data is None:
    return None
  if isinstance(data, dict):
    return {k: as_node_ids(v, f'{what}[{k!r}]') for k, v in data.items()}
  ids = convert_to_tensor(data)
  if ids.dtype == torch.bool:
    return ids.reshape(-1).nonzero().view(-1)
  if ids.is_floating_point() or ids.is_complex():
    raise ValueError(f'{what} must hold integer node ids or a boolean mask, got {ids.dtype}')
  ids = ids.to(torch.int64)
  if ids.numel() and int(ids.min()) < 0:
    raise ValueError(f'{what} holds a negative node id: {int(ids.min())}')
  return ids


def bounds(values: torch.Tensor) -> Tuple[int, int]:
  """``(smallest, largest)`` of a non-empty tensor, read at once: one host
  sync for a GPU tensor (its two values read together), two reads of host
  memory for a host one (stacking them there costs more than it saves).

  Args:
    values: a non-empty tensor.
  """
  lo, hi = torch.aminmax(values)
  if values.is_cpu:
    return lo.item(), hi.item()
  return tuple(torch.stack((lo, hi)).tolist())


def squeeze(data: Any) -> Any:
  """Squeezes a tensor (or the tensors of a dict) to at most 1-D for labels."""
  if data is None:
    return None
  if isinstance(data, dict):
    return {k: squeeze(v) for k, v in data.items()}
  if data.dim() > 1 and data.size(-1) == 1:
    return data.view(-1)
  return data


def id2idx(ids: Union[Sequence, torch.Tensor]) -> torch.Tensor:
  """Maps each id to its position: the result ``m`` has ``m[ids[i]] == i``.

  Ids absent from ``ids`` map to -1.
  """
  ids = convert_to_tensor(ids, dtype=torch.int64)
  if ids.numel() == 0:
    return torch.empty(0, dtype=torch.int64)
  if int(ids.min()) < 0:
    raise ValueError('ids must be non-negative')
  index = torch.full((int(ids.max()) + 1,), -1, dtype=torch.int64)
  index[ids] = torch.arange(ids.numel(), dtype=torch.int64)
  return index


def tensor_equal_with_device(lhs: torch.Tensor, rhs: torch.Tensor) -> bool:
  """Whether two tensors are on the same device and ``torch.equal``."""
  return lhs.device == rhs.device and torch.equal(lhs, rhs)


def apply_to_all_tensor(data: Any, tensor_method: Callable, *args, **kwargs) -> Any:
  """Applies ``tensor_method(t, *args, **kwargs)`` to every tensor nested in
  dicts, lists and tuples of ``data``; other values are kept."""
  if isinstance(data, dict):
    return {k: apply_to_all_tensor(v, tensor_method, *args, **kwargs) for k, v in data.items()}
  if isinstance(data, (list, tuple)):
    return type(data)(apply_to_all_tensor(v, tensor_method, *args, **kwargs) for v in data)
  if isinstance(data, torch.Tensor):
    return tensor_method(data, *args, **kwargs)
  return data


def share_memory(data: Any) -> Any:
  """Moves every tensor nested in ``data`` to shared memory."""
  return apply_to_all_tensor(data, torch.Tensor.share_memory_)
