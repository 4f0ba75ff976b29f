"""Utilities of graphlearn_torch."""

from .device import resolve_device
from .tensor import convert_to_tensor, id2idx, index_select, merge_dict, squeeze

__all__ = [
  'convert_to_tensor',
  'id2idx',
  'index_select',
  'merge_dict',
  'resolve_device',
  'squeeze',
]
