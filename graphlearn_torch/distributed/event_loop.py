"""An asyncio event loop in a thread of its own that keeps a bounded number
of coroutines (sampling tasks) in flight."""

import asyncio
import concurrent.futures
import logging
import threading
from typing import Any, Awaitable, Callable, Optional

import torch

logger = logging.getLogger(__name__)


def wrap_torch_future(f: torch.futures.Future) -> asyncio.Future:
  r"""An asyncio future, on the running loop, that completes with ``f``."""
  loop = asyncio.get_running_loop()
  out = loop.create_future()

  def done(fut: torch.futures.Future):
    try:
      result = fut.value()
    except Exception as e:  # handed to the awaiting coroutine
      loop.call_soon_threadsafe(_set_exception, out, e)
    else:
      loop.call_soon_threadsafe(_set_result, out, result)

  f.add_done_callback(done)
  return out


def _set_result(fut: asyncio.Future, value: Any) -> None:
  if not fut.done():
    fut.set_result(value)


def _set_exception(fut: asyncio.Future, exc: BaseException) -> None:
  if not fut.done():
    fut.set_exception(exc)


class ConcurrentEventLoop:
  r"""Runs coroutines on an event loop in a background thread, at most
  ``concurrency`` at a time.

  Args:
    concurrency: coroutines in flight at once (``add_task`` waits for a
      free place).
  """

  def __init__(self, concurrency: int):
    if not isinstance(concurrency, int) or concurrency < 1:
      raise ValueError(f'concurrency must be a positive integer, got {concurrency!r}')
    self.concurrency = concurrency
    self._loop: Optional[asyncio.AbstractEventLoop] = None
    self._thread: Optional[threading.Thread] = None
    self._slots = threading.BoundedSemaphore(concurrency)
    self._pending = 0
    self._idle = threading.Condition()

  def start_loop(self) -> None:
    r"""Starts the loop's thread (idempotent)."""
    if self._thread is not None:
      return
    self._loop = asyncio.new_event_loop()
    started = threading.Event()

    def run():
      asyncio.set_event_loop(self._loop)
      self._loop.call_soon(started.set)
      self._loop.run_forever()

    self._thread = threading.Thread(target=run, name='glt-event-loop', daemon=True)
    self._thread.start()
    started.wait()

  def shutdown_loop(self, timeout: float = 30.0) -> None:
    r"""Stops the loop after the tasks in flight, waiting at most ``timeout``."""
    if self._thread is None:
      return
    self.wait_all(timeout)
    self._loop.call_soon_threadsafe(self._loop.stop)
    self._thread.join(timeout)
    if not self._thread.is_alive():
      self._loop.close()
    self._thread = None
    self._loop = None

  def wait_all(self, timeout: Optional[float] = None) -> bool:
    r"""Waits until no task is in flight; returns False on timeout."""
    with self._idle:
      return self._idle.wait_for(lambda: self._pending == 0, timeout)

  def add_task(
    self,
    coro: Awaitable,
    callback: Optional[Callable[[Any], None]] = None,
    on_error: Optional[Callable[[BaseException], None]] = None,
    timeout: Optional[float] = None,
  ) -> None:
    r"""Schedules ``coro``; ``callback(result)`` runs in the loop's thread
    when it finishes, or ``on_error(exception)`` when it fails (without one,
    the failure is logged). Waits for a free place among ``concurrency``.

    Raises:
      TimeoutError: no place freed up within ``timeout`` seconds.
    """
    self.start_loop()
    if not self._slots.acquire(timeout=timeout):
      raise TimeoutError(f'no sampling task finished within {timeout} s')
    with self._idle:
      self._pending += 1
    future = asyncio.run_coroutine_threadsafe(coro, self._loop)

    def finished(f):
      try:
        error = f.exception()
        if error is not None:
          if on_error is None:
            logger.error('a sampling task failed', exc_info=error)
          else:
            on_error(error)
        elif callback is not None:
          callback(f.result())
      finally:
        self._slots.release()
        with self._idle:
          self._pending -= 1
          self._idle.notify_all()

    future.add_done_callback(finished)

  def submit(self, coro: Awaitable) -> concurrent.futures.Future:
    r"""Schedules ``coro`` on the loop (not counted among ``concurrency``);
    returns a future of its result."""
    self.start_loop()
    return asyncio.run_coroutine_threadsafe(coro, self._loop)

  def run_task(self, coro: Awaitable, timeout: Optional[float] = None) -> Any:
    r"""Runs ``coro`` on the loop and returns its result (or raises its error).

    Raises:
      TimeoutError: it took longer than ``timeout`` seconds.
    """
    return result_within(self.submit(coro), timeout)


def result_within(future: concurrent.futures.Future, timeout: Optional[float]) -> Any:
  r"""The result of a task's ``future`` (or its error); cancels the task
  after ``timeout`` seconds.

  Raises:
    TimeoutError: it took longer than ``timeout`` seconds.
  """
  try:
    return future.result(timeout)
  except concurrent.futures.TimeoutError:  # not the builtin before Python 3.11
    future.cancel()
    raise TimeoutError(f'a sampling task took longer than {timeout} s') from None
