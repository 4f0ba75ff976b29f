"""Threads that sample several batches at once, one batch a thread.

One batch's kernels stop scaling with threads well before a large host's
cores run out: a hop's new nodes are numbered in order of first appearance,
which many threads do with about twice the random memory reads of one, and
every step of a batch waits for its slowest thread. Batches sampled at
once, each on one thread, share the cores instead, as PyG's ``num_workers``
processes do, without copying a batch between processes. ``BatchThreads``
runs work on such threads: each runs its CPU kernels (ours and ATen's) on
itself alone (``set_this_thread_kernel_threads``).
"""

import concurrent.futures
import weakref
from typing import Callable, TypeVar

from .._ext import ops
from .launched import Launched

T = TypeVar('T')


def _kernels_on_this_thread_alone() -> None:
  ops.set_this_thread_kernel_threads(1)


class BatchThreads:
  r"""``num_threads`` threads that run what is launched on them, in the
  order launched, each running its CPU kernels on itself alone. Work not yet
  started when they are shut down (or collected) is dropped; work running
  then finishes.

  Args:
    num_threads: how many batches run at once.

  Raises:
    ValueError: ``num_threads`` is below 1.
  """

  def __init__(self, num_threads: int):
    if int(num_threads) < 1:
      raise ValueError(f'batches sampled at once must be >= 1, got {num_threads}')
    self.num_threads = int(num_threads)
    self._executor = concurrent.futures.ThreadPoolExecutor(
      self.num_threads, thread_name_prefix='glt-batch', initializer=_kernels_on_this_thread_alone
    )
    self._finalizer = weakref.finalize(
      self, self._executor.shutdown, wait=False, cancel_futures=True
    )

  def launch(self, fn: Callable[..., T], *args) -> Launched[T]:
    r"""``fn(*args)`` started on the first free thread: ``result()`` waits
    for it and gives its result (or raises what it raised); ``discard()``
    drops it if it has not started.

    Raises:
      RuntimeError: the threads were shut down.
    """
    if not self._finalizer.alive:
      raise RuntimeError('these batch threads were shut down (a loader after its shutdown())')
    future = self._executor.submit(fn, *args)
    return Launched(future.result, future.cancel)

  def shutdown(self) -> None:
    r"""Drops the work not started and waits for the running work."""
    self._finalizer.detach()
    self._executor.shutdown(wait=True, cancel_futures=True)
