"""Byte sizes written the way users write them ('256MB', '1.5GB', 4096):
GLT's ``utils.units``."""

import re
from typing import Union

UNITS = {
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


def parse_size(sz: Union[int, float, str]) -> int:
  r"""Returns a byte count from a number or a string such as ``'256MB'``.

  Units are binary (``'1KB'`` is 1024 bytes), as in GLT.

  Args:
    sz: bytes as a number (a float is truncated, as GLT does), or a number
      with an optional unit (B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB; any
      case).
  """
  if isinstance(sz, bool):
    raise TypeError(f'size must be a number or a string like "256MB", got {sz!r}')
  if isinstance(sz, (int, float)):
    if not sz >= 0:
      raise ValueError(f'size must be a non-negative number, got {sz}')
    return int(sz)
  if not isinstance(sz, str):
    raise TypeError(f'size must be a number or a string like "256MB", got {type(sz).__name__}')
  match = _PATTERN.match(sz)
  unit = match.group(2).upper() if match else None
  if match is None or unit not in UNITS:
    raise ValueError(f'cannot read {sz!r} as a size; write it like 4096, "256MB" or "1.5GB"')
  return int(float(match.group(1)) * UNITS[unit])
