"""Arrays the sampler reads at random (a topology's entries, their edge ids,
weights and times), placed on 2 MB pages where Linux gives them: a random
read of an array far past the TLB's reach then rarely costs a page walk.
The CPU kernels place what they build themselves (``coo_to_csr``'s outputs,
the inducer's id-indexed maps) the same way; a table they did not allocate
(a user's feature table) is moved onto them in place (``collapse``)."""

import logging
import time

import torch

from .._ext import ops

logger = logging.getLogger(__name__)

HUGE_PAGE = 2 << 20


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


def in_private_memory(t: torch.Tensor) -> bool:
  """Whether ``t``'s bytes all lie in this process's private anonymous
  memory (not a file's pages, not shared memory), by ``/proc/self/maps``."""
  start, end = t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()
  try:
    with open('/proc/self/maps') as maps:
      for line in maps:  # in address order
        fields = line.split(maxsplit=5)
        lo, hi = (int(bound, 16) for bound in fields[0].split('-'))
        if hi <= start:
          continue
        path = fields[5].strip() if len(fields) > 5 else ''
        if lo > start or not fields[1].endswith('p') or path not in ('', '[heap]'):
          return False
        if hi >= end:
          return True
        start = hi
  except OSError:  # no /proc: where the bytes lie is unknown
    return False
  return False


def collapse(table: torch.Tensor, name: str) -> int:
  """Moves ``table``'s memory onto huge pages in place where it is this
  process's private anonymous memory and the kernel can (Linux 6.1 on, on
  all threads); returns the bytes moved. About a second a GB on 2 cores.
  A file's pages (a table mapped from disk) and shared memory stay as
  they are.

  Args:
    table: the contiguous CPU tensor to move.
    name: what it is, for the log.
  """
  if table.device.type != 'cpu' or not table.is_contiguous() or table.numel() == 0:
    return 0
  if not in_private_memory(table):
    return 0
  return collapse_own(table, name)


def collapse_own(memory: torch.Tensor, name: str) -> int:
  """Moves ``memory`` (contiguous, on the CPU) onto huge pages in place, as
  ``collapse`` does, where the caller knows it to be memory of its own: this
  process's private memory, or a memfd of its own mapped by
  ``ops.map_shared_file`` (whose every mapping that way then reads it on
  huge pages); returns the bytes moved, and logs them.

  Args:
    memory: the memory to move.
    name: what it is, for the log.
  """
  whole = whole_huge_pages(memory)
  if whole == 0:
    return 0
  started = time.perf_counter()
  moved = ops.collapse_huge_pages(memory)
  if moved == whole:
    logger.info(
      'moved the %s (%d MB) onto 2 MB pages in %.2f s (faster random reads)',
      name,
      moved >> 20,
      time.perf_counter() - started,
    )
  else:
    logger.info(
      "moved %d of the %s's %d MB onto 2 MB pages; the rest stays on 4 KB pages (a kernel "
      'before 6.1, huge pages off, no free huge page or memory cgroup room just now, or a '
      'page two of its mappings share)',
      moved >> 20,
      name,
      whole >> 20,
    )
  return moved


def whole_huge_pages(t: torch.Tensor) -> int:
  """The bytes of ``t``'s memory that fill whole 2 MB pages: what
  ``collapse`` can move."""
  start, end = t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()
  first, last = -(-start // HUGE_PAGE) * HUGE_PAGE, end // HUGE_PAGE * HUGE_PAGE
  return max(last - first, 0)
