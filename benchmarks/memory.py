"""A job's host memory as the kernel counts it: the proportional set size
(PSS: a page shared by k processes counts 1/k in each) of a process tree,
summed by what the pages hold.

A mapping's kind comes from its name in ``/proc/<pid>/smaps``:
  - 'channels': the shared-memory channels' memfds (``glt-shm-channel``);
  - 'shared tables': tables the host's processes share (host-shared memfds,
    ``glt-host-tensor``; torch's shared memory, ``/dev/shm``);
  - 'partition files': memory-mapped files under a given directory (feature
    tables read in place from the partition's ``.npy`` files);
  - 'GPU driver': the GPU driver's mappings (``/dev/nvidia*``: pinned
    allocations among them);
  - 'libraries': shared libraries' files (``.so``);
  - 'process': the rest, each process's own memory (the interpreter's and
    torch's heaps, buffers, thread stacks).
"""

import collections
from typing import List, Optional, Tuple

import psutil

KINDS = ('shared tables', 'partition files', 'channels', 'GPU driver', 'libraries', 'process')
_NAMED = (
  ('channels', ('glt-shm-channel',)),
  ('shared tables', ('glt-host-tensor', '/dev/shm/')),
  ('GPU driver', ('/dev/nvidia',)),
)


def _kind(mapping_line: str, files_under: Optional[str]) -> str:
  for kind, marks in _NAMED:
    if any(mark in mapping_line for mark in marks):
      return kind
  if files_under and files_under in mapping_line:
    return 'partition files'
  if '.so' in mapping_line:
    return 'libraries'
  return 'process'


def process_pss_mb(pid: int, files_under: Optional[str] = None) -> collections.Counter:
  r"""PSS of process ``pid`` in MB, by kind of mapping (module docstring).

  Args:
    pid: the process.
    files_under: a directory whose mapped files count as 'partition files'.
  """
  kb = collections.Counter()
  kind = 'process'
  with open(f'/proc/{pid}/smaps') as f:
    for line in f:
      fields = line.split()
      if not fields[0].endswith(':'):  # a mapping's first line
        kind = _kind(line, files_under)
      elif fields[0] == 'Pss:':
        kb[kind] += int(fields[1])
  return collections.Counter({k: v / 1024 for k, v in kb.items()})


def tree_pids(root_pid: Optional[int] = None) -> List[int]:
  r"""``root_pid`` (default: this process) and every process under it."""
  root = psutil.Process(root_pid)
  return [root.pid, *(p.pid for p in root.children(recursive=True))]


def fresh_interpreters(pids: List[int]) -> int:
  r"""How many of ``pids`` started an interpreter of their own (spawned, or a
  fork server), not forked from their parent (by ``fork`` or from a fork
  server): a forked process keeps its parent's command line, and its pages
  until it writes them.

  Args:
    pids: processes, each alive or already gone (not counted).
  """
  fresh = 0
  for pid in pids:
    try:
      proc = psutil.Process(pid)
      parent = proc.parent()
      fresh += parent is None or proc.cmdline() != parent.cmdline()
    except psutil.Error:  # it exited meanwhile
      pass
  return fresh


def tree_pss_mb(
  root_pid: Optional[int] = None, files_under: Optional[str] = None
) -> Tuple[collections.Counter, int]:
  r"""``(PSS in MB by kind, number of processes)`` of a process tree (default:
  this process's), each page counted once over the tree."""
  total = collections.Counter()
  count = 0
  for pid in tree_pids(root_pid):
    try:
      total.update(process_pss_mb(pid, files_under))
      count += 1
    except (OSError, psutil.Error):  # it exited meanwhile
      pass
  return total, count
