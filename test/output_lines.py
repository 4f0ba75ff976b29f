"""A child process's output read a line at a time, with a deadline on every wait.

``readline`` on a pipe waits for a whole line or the end of the output, even
after ``select`` found something to read: a child that wrote part of a line
and then hung would hold the test until pytest's own timeout. Here a thread
reads the lines into a queue (so the child never blocks on a full pipe
either), and each wait for the next one has a deadline. The thread owns the
stream: read the rest of it with ``rest``, not ``Popen.communicate``."""

import queue
import threading
import time
from typing import Callable, List, Optional, TextIO


class OutputLines:
  r"""The lines of ``stream`` (a child's text output), as they come.

  Args:
    stream: the child's stdout, opened in text mode.
  """

  def __init__(self, stream: TextIO):
    self._lines: queue.Queue = queue.Queue()  # the lines, then None at the end
    self._ended = False
    self.seen: List[str] = []  # every line read so far
    self._reader = threading.Thread(target=self._read, args=(stream,), daemon=True)
    self._reader.start()

  def _read(self, stream: TextIO) -> None:
    try:
      for line in stream:
        self._lines.put(line)
    finally:
      self._lines.put(None)

  def _next(self, deadline: float) -> Optional[str]:
    r"""The next line, or None at the end of the output; raises
    ``TimeoutError`` when ``deadline`` (monotonic) passes first."""
    if self._ended:
      return None
    try:
      line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
    except queue.Empty:
      raise TimeoutError from None
    if line is None:
      self._ended = True
    else:
      self.seen.append(line)
    return line

  def until(self, done: Callable[[str], bool], timeout: float, what: str = 'the line') -> str:
    r"""Reads lines up to the first for which ``done`` is true; returns the
    lines this call read. Raises AssertionError, with the output so far, when
    the output ends or ``timeout`` seconds pass first.

    Args:
      done: whether a line is the one waited for.
      timeout: seconds to wait for it.
      what: what is waited for, in the error.
    """
    deadline = time.monotonic() + timeout
    first = len(self.seen)
    try:
      while (line := self._next(deadline)) is not None:
        if done(line):
          return ''.join(self.seen[first:])
      why = 'the output ended'
    except TimeoutError:
      why = f'nothing more within {timeout} s'
    raise AssertionError(f'{why} before {what}:\n' + ''.join(self.seen)[-4000:])

  def first_line(self, timeout: float) -> str:
    r"""The output's next line ('' at its end); AssertionError after
    ``timeout`` seconds without one."""
    try:
      line = self._next(time.monotonic() + timeout)
    except TimeoutError:
      raise AssertionError(f'no line within {timeout} s') from None
    return line or ''

  def rest(self, timeout: float) -> str:
    r"""The lines from here to the end of the output (the child and every
    process that shares its output exited); AssertionError, with the output
    so far, when it has not ended within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    first = len(self.seen)
    try:
      while self._next(deadline) is not None:
        pass
    except TimeoutError:
      raise AssertionError(
        f'the output went on past {timeout} s:\n' + ''.join(self.seen)[-4000:]
      ) from None
    return ''.join(self.seen[first:])
