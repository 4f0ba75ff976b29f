"""An object pickled for a process before it starts.

A process that gets its payload as bytes and unpickles it itself can report
a failure there (a partition that does not load) with its cause. But bytes
pickled before the process starts cannot hand over shared descriptors (a
tensor in shared memory) with the process's start, as multiprocessing does
for a process's arguments: they go through multiprocessing's resource-sharer
thread, which the receiver asks for each. A process forked while that
thread answers its first request (which imports ``hmac``) inherits the
import's lock held, and hangs at its own first request, for good.

``pickled_for_process`` pickles for a forked process without that thread:
each shared descriptor is duplicated and travels as its number, which the
forked process inherits. For a spawned process or one from a fork server
(neither inherits this process's locks) it pickles as multiprocessing does.
"""

import contextlib
import os
from dataclasses import dataclass
from multiprocessing import context
from multiprocessing.reduction import ForkingPickler
from typing import Any, Iterator, List


@dataclass
class InheritedFd:
  r"""A descriptor a forked process inherited at the same number.

  Args:
    fd: the descriptor.
  """

  fd: int

  def detach(self) -> int:
    r"""The descriptor, now the receiver's to close."""
    return self.fd


class ForkedProcessDescriptors:
  r"""Stands for a process about to be forked while its payload is pickled:
  multiprocessing's ``DupFd`` asks it to keep each shared descriptor open
  for the process (a duplicate here, until ``close``) and for what carries
  it (``InheritedFd``)."""

  DupFd = InheritedFd

  def __init__(self):
    self.fds: List[int] = []

  def duplicate_for_child(self, fd: int) -> int:
    r"""A duplicate of ``fd`` that lives until the process is forked."""
    duplicate = os.dup(fd)
    self.fds.append(duplicate)
    return duplicate

  def close(self) -> None:
    r"""Closes the duplicates here (the forked process holds its own)."""
    while self.fds:
      os.close(self.fds.pop())


@contextlib.contextmanager
def pickled_for_process(obj: Any, start_method: str) -> Iterator[bytes]:
  r"""``obj`` pickled (``ForkingPickler``) for one process, to be started
  inside the ``with`` block with ``start_method``; the receiver unpickles it
  once (``pickle.loads``). A payload for a forked process holds duplicates
  of its shared descriptors open until the block ends.

  Args:
    obj: what to pickle.
    start_method: how the process starts: ``'fork'``, ``'forkserver'`` or
      ``'spawn'``.
  """
  if start_method != 'fork':
    yield bytes(ForkingPickler.dumps(obj))
    return
  descriptors = ForkedProcessDescriptors()
  outer = context.get_spawning_popen()
  context.set_spawning_popen(descriptors)
  try:
    payload = bytes(ForkingPickler.dumps(obj))
  except BaseException:
    descriptors.close()
    raise
  finally:
    context.set_spawning_popen(outer)
  try:
    yield payload
  finally:
    descriptors.close()
