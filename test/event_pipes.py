"""Events from spawned test processes, one pipe per process.

A shared ``multiprocessing.Queue`` does not survive SIGKILL: a process killed
while its feeder thread holds the queue's write lock leaves that lock held,
and every other process then blocks on ``put``. A pipe per process has no
shared lock; a killed writer only closes its own pipe."""

import multiprocessing
import queue
import time
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_connections
from typing import Any, Iterable, List, Optional, Tuple

import pytest

Event = Tuple[str, int, Any]  # (kind, rank, value)


class Events:
  r"""A process's end of its event pipe (picklable into spawned processes)."""

  def __init__(self, conn: Connection):
    self.conn = conn

  def put(self, event: Event) -> None:
    self.conn.send(event)


class EventPipes:
  r"""The test's ends of the event pipes, read in arrival order."""

  def __init__(self):
    self.readers: List[Connection] = []
    self.unread: List[Event] = []

  def writer(self) -> Events:
    r"""A new pipe; give the returned end to one process."""
    reader, writer = multiprocessing.Pipe(duplex=False)
    self.readers.append(reader)
    return Events(writer)

  def _next(self, timeout: float) -> Event:
    deadline = time.monotonic() + timeout
    while self.readers:
      ready = wait_connections(self.readers, max(0.0, deadline - time.monotonic()))
      if not ready:
        raise queue.Empty
      for reader in ready:
        try:
          return reader.recv()
        except EOFError:  # that process is gone
          self.readers.remove(reader)
    raise queue.Empty

  def wait(
    self,
    kind: str,
    rank: Optional[int] = None,
    timeout: float = 120,
    failures: Iterable[str] = (),
  ) -> Any:
    r"""The value of the oldest unread event ``kind`` (of ``rank``).

    Args:
      kind: the event kind to wait for.
      rank: only events of this rank; ``None`` takes any.
      timeout: most seconds to wait; the test fails after them.
      failures: event kinds that fail the test when they arrive first.
    """
    deadline = time.monotonic() + timeout
    while True:
      for i, (k, r, value) in enumerate(self.unread):
        if k == kind and (rank is None or r == rank):
          del self.unread[i]
          return value
      try:
        got = self._next(max(0.1, deadline - time.monotonic()))
      except queue.Empty:
        pytest.fail(f'no {kind} event of {rank} in {timeout} s; unread: {self.unread}')
      if got[0] in failures:
        pytest.fail(f'{got[0]} of {got[1]}:\n{got[2]}')
      self.unread.append(got)
