"""MpChannel: a channel on a torch.multiprocessing queue."""

import queue
from typing import Optional

import torch.multiprocessing as mp

from .base import ChannelBase, QueueTimeoutError, SampleMessage, split_message, timeout_ms_arg


class MpChannel(ChannelBase):
  r"""A channel on a ``torch.multiprocessing`` queue: each tensor moves to
  a shared-memory segment of its own and travels as a file descriptor.
  Simpler than :class:`ShmChannel` and slower for large messages. Like any
  multiprocessing queue, it can only be passed to a process when that process
  is started.

  Args:
    capacity: most messages queued at once (0: unbounded). GLT's ``maxsize``
      keyword is accepted too.
    context: the multiprocessing start method whose queue to use.
  """

  def __init__(self, capacity: int = 0, context: str = 'spawn', **kwargs):
    capacity = kwargs.pop('maxsize', capacity)
    if kwargs:
      raise TypeError(f'MpChannel got unexpected arguments {sorted(kwargs)}')
    self._queue = mp.get_context(context).Queue(maxsize=capacity)

  def send(self, msg: SampleMessage, timeout_ms: Optional[float] = None, **kwargs) -> None:
    r"""Queues ``msg``.

    Args:
      msg: named tensors.
      timeout_ms: most milliseconds to wait for room; ``None`` waits forever.

    Raises:
      QueueTimeoutError: no room within ``timeout_ms``.
    """
    split_message(msg)
    timeout = timeout_ms_arg(timeout_ms)
    try:
      self._queue.put(msg, timeout=None if timeout < 0 else timeout / 1000)
    except queue.Full:
      raise QueueTimeoutError(f'no room in the channel within {timeout_ms} ms') from None

  def recv(self, timeout_ms: Optional[float] = None, **kwargs) -> SampleMessage:
    r"""Returns the oldest message.

    Args:
      timeout_ms: most milliseconds to wait; ``None`` waits forever.

    Raises:
      QueueTimeoutError: nothing arrived within ``timeout_ms``.
    """
    timeout = timeout_ms_arg(timeout_ms)
    try:
      return self._queue.get(timeout=None if timeout < 0 else timeout / 1000)
    except queue.Empty:
      raise QueueTimeoutError(f'no message arrived within {timeout_ms} ms') from None

  def empty(self) -> bool:
    r"""Whether no message is queued (approximate, as for any mp queue)."""
    return self._queue.empty()
