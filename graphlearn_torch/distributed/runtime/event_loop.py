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
  r"""An asyncio future, on the running loop, that completes with ``f``
  (done already where ``f`` is: awaiting it does not yield)."""
  loop = asyncio.get_running_loop()
  out = loop.create_future()
  if f.done():  # e.g. rows read here: no wake-up of the loop from outside
    try:
      out.set_result(f.value())
    except Exception as e:  # handed to the awaiting coroutine
      out.set_exception(e)
    return out

  def done(fut: torch.futures.Future):
    try:
      result = fut.value()
    except Exception as e:  # handed to the awaiting coroutine
      loop.call_soon_threadsafe(_set_exception, out, e)
    else:
      loop.call_soon_threadsafe(_set_result, out, result)

  f.add_done_callback(done)
  return out


def _discard(coro: Awaitable) -> None:
  r"""Closes a coroutine that will never run (no "never awaited" warning)."""
  if asyncio.iscoroutine(coro):
    coro.close()


def _call_handler(handler: Callable[[Any], None], arg: Any) -> None:
  r"""Runs a task's callback or error handler on the loop; what it raises is
  logged, as nobody waits on it and the loop must go on."""
  try:
    handler(arg)
  except Exception:
    logger.exception('the handler of a sampling task failed')


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
    self._start_lock = threading.Lock()
    self._shut_down = False
    self._slots = threading.BoundedSemaphore(concurrency)
    self._pending = 0
    self._idle = threading.Condition()

  def start_loop(self) -> None:
    r"""Starts the loop's thread (idempotent, and safe from several threads
    at once).

    Raises:
      RuntimeError: the loop was shut down (``shutdown_loop``).
    """
    with self._start_lock:
      if self._shut_down:
        raise RuntimeError('the sampling event loop was shut down')
      if self._thread is not None:
        return
      loop = asyncio.new_event_loop()
      started = threading.Event()

      def run():
        asyncio.set_event_loop(loop)
        loop.call_soon(started.set)
        loop.run_forever()

      thread = threading.Thread(target=run, name='glt-event-loop', daemon=True)
      thread.start()
      started.wait()
      self._loop, self._thread = loop, thread

  def _start_for(self, coro: Awaitable) -> None:
    try:
      self.start_loop()
    except RuntimeError:
      _discard(coro)
      raise

  def shutdown_loop(self, timeout: float = 30.0) -> None:
    r"""Stops the loop after the tasks in flight, waiting at most ``timeout``;
    it takes no task after this."""
    with self._start_lock:
      self._shut_down = True
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
    The place is free again before the callback runs, so a callback may
    start the next task; the task counts for ``wait_all`` until its callback
    has returned.

    Raises:
      TimeoutError: no place freed up within ``timeout`` seconds.
    """
    self._start_for(coro)
    try:
      acquired = self._slots.acquire(timeout=timeout)
    except BaseException:  # interrupted (Ctrl-C): the task never runs
      _discard(coro)
      raise
    if not acquired:
      _discard(coro)
      raise TimeoutError(f'no sampling task finished within {timeout} s')
    with self._idle:
      self._pending += 1
    asyncio.run_coroutine_threadsafe(self._counted(coro, callback, on_error), self._loop)

  async def _counted(self, coro: Awaitable, callback, on_error) -> None:
    r"""Runs an ``add_task`` task and then its callback in the loop's thread
    (also when the task finishes at once), and gives up its counts."""
    try:
      try:
        result = await coro
      finally:
        self._slots.release()
    except Exception as error:
      if on_error is None:
        logger.error('a sampling task failed', exc_info=error)
      else:
        _call_handler(on_error, error)
    else:
      if callback is not None:
        _call_handler(callback, result)
    finally:
      with self._idle:
        self._pending -= 1
        self._idle.notify_all()

  def submit(self, coro: Awaitable) -> concurrent.futures.Future:
    r"""Schedules ``coro`` on the loop (not counted among ``concurrency``);
    returns a future of its result."""
    self._start_for(coro)
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
    raise task_timeout(timeout) from None


def run_in_this_thread(
  loop: asyncio.AbstractEventLoop, coro: Awaitable, timeout: Optional[float]
) -> Any:
  r"""Runs ``coro`` to its end on ``loop`` in the calling thread (no other
  thread between the caller and the result); cancels it after ``timeout``
  seconds.

  Raises:
    TimeoutError: it took longer than ``timeout`` seconds.
  """
  if timeout is not None:
    coro = asyncio.wait_for(coro, timeout)
  try:
    return loop.run_until_complete(coro)
  except asyncio.TimeoutError:  # not the builtin before Python 3.11
    raise task_timeout(timeout) from None


def loop_runs_here() -> bool:
  r"""Whether an event loop runs in this thread (a notebook's, say): another
  cannot run here then."""
  try:
    asyncio.get_running_loop()
  except RuntimeError:
    return False
  return True


def task_timeout(timeout: Optional[float]) -> TimeoutError:
  r"""The error of a sampling task that took longer than ``timeout`` seconds."""
  return TimeoutError(f'a sampling task took longer than {timeout} s')
