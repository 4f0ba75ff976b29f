"""Utilities of graphlearn_torch."""

from .device import resolve_device
from .size import parse_size
from .tensor import convert_to_tensor, id2idx, squeeze

__all__ = [
  'convert_to_tensor',
  'id2idx',
  'parse_size',
  'resolve_device',
  'squeeze',
]
