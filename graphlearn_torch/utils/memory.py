"""How much memory this process can still get: the machine's available
memory, bounded by every memory cgroup (v1 or v2) it runs in."""

import os
from typing import Callable, List, Optional, Tuple

_V1_ROOT = '/sys/fs/cgroup/memory'
_V2_ROOT = '/sys/fs/cgroup'


def _read_int(path: str) -> Optional[int]:
  try:
    with open(path) as f:
      value = f.read().strip()
  except OSError:
    return None
  return None if value in ('', 'max') else int(value)


def _mem_available() -> Optional[int]:
  try:
    with open('/proc/meminfo') as f:
      for line in f:
        if line.startswith('MemAvailable:'):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return None


def _cgroup_dirs() -> List[Tuple[str, str, str]]:
  """``(directory, limit file, usage file)`` of this process's memory cgroup
  and its ancestors."""
  try:
    with open('/proc/self/cgroup') as f:
      lines = f.read().splitlines()
  except OSError:
    return []
  for line in lines:
    _, controllers, path = line.split(':', 2)
    if 'memory' in controllers.split(','):
      root, files = _V1_ROOT, ('memory.limit_in_bytes', 'memory.usage_in_bytes')
      break
  else:
    if not any(line.startswith('0::') for line in lines):
      return []
    path = next(line for line in lines if line.startswith('0::')).split(':', 2)[2]
    root, files = _V2_ROOT, ('memory.max', 'memory.current')
  dirs = []
  parts = [p for p in path.split('/') if p]
  for depth in range(len(parts), -1, -1):
    d = os.path.join(root, *parts[:depth])
    if os.path.isdir(d):
      dirs.append((d, os.path.join(d, files[0]), os.path.join(d, files[1])))
  return dirs


def available_memory() -> Tuple[Optional[int], str]:
  """Bytes this process can still allocate, and where the bound comes from
  (``None`` when nothing could be read)."""
  best, source = _mem_available(), 'MemAvailable in /proc/meminfo'
  for _, limit_file, usage_file in _cgroup_dirs():
    limit, usage = _read_int(limit_file), _read_int(usage_file)
    if limit is None or usage is None or limit >= 1 << 60:
      continue
    room = max(limit - usage, 0)
    if best is None or room < best:
      best, source = room, f'the memory cgroup limit in {limit_file}'
  return best, source


def memory_short_of(nbytes: int) -> Optional[Tuple[int, str]]:
  """``available_memory()`` where ``nbytes`` exceed it (an allocation this
  process cannot get), else None (it fits, or nothing could be read)."""
  available, source = available_memory()
  if available is not None and nbytes > available:
    return available, source
  return None


def require_memory(nbytes: int, message: Callable[[int, str], str]) -> None:
  """Raises MemoryError with ``message(available bytes, where that bound
  comes from)`` when ``nbytes`` exceed what this process can get.

  Args:
    nbytes: the bytes an allocation would take.
    message: the error's text, naming what asked for them.
  """
  short = memory_short_of(nbytes)
  if short is not None:
    raise MemoryError(message(*short))


def check_room_for_rows(num_rows: int, largest_id: str) -> None:
  """Refuses a compressed topology whose index pointer alone (8 bytes a row)
  would take more memory than this process can get: a stray large id (the
  row count taken from it) then raises MemoryError naming it, rather than
  the allocation running the host, or the process's cgroup, out of memory.

  Args:
    num_rows: the topology's rows.
    largest_id: what sets the row count, for the message.
  """
  needed = 8 * (num_rows + 1)
  require_memory(
    needed,
    lambda available, source: (
      f'a topology of {num_rows:,} rows needs {needed:,} bytes for its index pointer alone, '
      f'more than the {available:,} bytes left ({source}); the rows come from {largest_id}: '
      'check the ids in edge_index and num_nodes'
    ),
  )
