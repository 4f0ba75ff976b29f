"""How many threads graphlearn_torch's CPU kernels use.

The kernels (neighbor sampling, relabelling, feature gather, the partitioned
and COO-to-CSR passes) run on ``torch.get_num_threads()`` threads, at most a
cap set for the process:

- ``set_kernel_threads(n)`` (or ``GLT_KERNEL_THREADS=n`` in the environment,
  read at import) caps them at ``n``; ``None`` (or 0) lifts the cap.
- Processes of one distributed job that share a host each take their share
  of its cores by default: ``init_rpc`` caps every process at
  ``cores // processes of the job on this host`` (at least 1), unless a cap
  was set already (by the call or the variable above, ``GLT_KERNEL_THREADS=0``
  keeping torch's count). Sampling processes (worker mode) run their kernels
  on 1 thread whatever the cap.

The threads claim work in small chunks and sleep when idle (after 20
microseconds), so a process beside busy ones keeps most of its share.
"""

import logging
import os
from typing import Optional

from .._ext import ops

logger = logging.getLogger(__name__)

ENV_VAR = 'GLT_KERNEL_THREADS'


def kernel_threads() -> int:
  r"""The threads the CPU kernels use now: ``torch.get_num_threads()``, at
  most the cap."""
  return ops.kernel_threads()


def kernel_thread_cap() -> Optional[int]:
  r"""The cap on the CPU kernels' threads, or None where there is none."""
  return ops.kernel_thread_cap() or None


def set_kernel_threads(num_threads: Optional[int]) -> None:
  r"""Caps the CPU kernels' threads in this process.

  Args:
    num_threads: the most threads a kernel uses (``torch.get_num_threads()``
      still bounds it); None or 0 lifts the cap.

  Raises:
    ValueError: ``num_threads`` is negative.
  """
  ops.set_kernel_thread_cap(int(num_threads or 0))


def available_cores() -> int:
  r"""The cores this process may run on (its affinity mask)."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # pragma: no cover - platforms without affinity masks
    return os.cpu_count() or 1


def host_share(processes_on_host: int) -> int:
  r"""One process's share of this host's cores when ``processes_on_host``
  processes share them (at least 1).

  Args:
    processes_on_host: how many processes share the host.
  """
  return max(1, available_cores() // max(1, processes_on_host))


def cap_for_shared_host(processes_on_host: int) -> int:
  r"""Caps the kernels at this process's share of the host, unless a cap is
  set already (``set_kernel_threads`` or ``GLT_KERNEL_THREADS``); returns
  the threads the kernels use now.

  Args:
    processes_on_host: the processes of the job on this host, this one
      among them.
  """
  if kernel_thread_cap() is None and ENV_VAR not in os.environ:
    share = host_share(processes_on_host)
    set_kernel_threads(share)
    logger.info(
      '%d processes of the job share this host (%d cores): CPU kernels use at most %d '
      'thread(s) each (set_kernel_threads or %s to change)',
      processes_on_host,
      available_cores(),
      share,
      ENV_VAR,
    )
  return kernel_threads()


def _cap_from_environment() -> None:
  value = os.environ.get(ENV_VAR)
  if value is None:
    return
  try:
    set_kernel_threads(int(value))
  except ValueError as e:
    raise ValueError(f'{ENV_VAR} must be a thread count >= 0, got {value!r}') from e


_cap_from_environment()
