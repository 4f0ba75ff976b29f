"""Byte sizes written the way users write them ('256MB', '1.5GB', 4096)."""

import re
from typing import Union

_UNITS = {
  '': 1,
  'B': 1,
  'K': 1 << 10,
  'KB': 1 << 10,
  'KIB': 1 << 10,
  'M': 1 << 20,
  'MB': 1 << 20,
  'MIB': 1 << 20,
  'G': 1 << 30,
  'GB': 1 << 30,
  'GIB': 1 << 30,
  'T': 1 << 40,
  'TB': 1 << 40,
  'TIB': 1 << 40,
}
_PATTERN = re.compile(r'^\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*$')


def parse_size(size: Union[int, str]) -> int:
  r"""Returns a byte count from an int or a string such as ``'256MB'``.

  Units are binary (``'1KB'`` is 1024 bytes), as in GLT.

  Args:
    size: bytes as an int, or a number with an optional unit (B, K/KB/KiB,
      M/MB/MiB, G/GB/GiB, T/TB/TiB; any case).
  """
  if isinstance(size, bool):
    raise TypeError(f'size must be an int or a string like "256MB", got {size!r}')
  if isinstance(size, int):
    if size < 0:
      raise ValueError(f'size must not be negative, got {size}')
    return size
  if not isinstance(size, str):
    raise TypeError(f'size must be an int or a string like "256MB", got {type(size).__name__}')
  match = _PATTERN.match(size)
  unit = match.group(2).upper() if match else None
  if match is None or unit not in _UNITS:
    raise ValueError(f'cannot read {size!r} as a size; write it like 4096, "256MB" or "1.5GB"')
  return int(float(match.group(1)) * _UNITS[unit])
