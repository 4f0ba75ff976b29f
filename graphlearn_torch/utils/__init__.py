"""Utilities of graphlearn_torch."""

from .device import resolve_device
from .tensor import convert_to_tensor, id2idx, squeeze

__all__ = [
  'convert_to_tensor',
  'id2idx',
  'resolve_device',
  'squeeze',
]
