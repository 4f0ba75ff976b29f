"""RemoteReceivingChannel: a client's end of the batches its servers sample."""

import logging
import queue
import threading
from typing import Callable, List, Optional, Sequence, Union

import torch

from .base import ChannelBase, QueueTimeoutError, SampleMessage

logger = logging.getLogger(__name__)


Fetch = Callable[[int, int], torch.futures.Future]
r"""Asks a server for its producer's next batch: ``(server rank, producer id)
-> future of the message``."""


class RemoteReceivingChannel(ChannelBase):
  r"""Receives the batches of sampling producers on servers, keeping
  ``prefetch_size`` requests in flight to each server; batches come in the
  order they are ready, whichever server they are from.

  Args:
    server_rank: the server (or servers).
    producer_id: the producer on each server.
    prefetch_size: requests in flight to each server.
    fetch: how to ask a server for a batch (the client's request, which its
      loader gives).
  """

  def __init__(
    self,
    server_rank: Union[int, List[int]],
    producer_id: Union[int, List[int]],
    prefetch_size: int = 2,
    fetch: Optional[Fetch] = None,
  ):
    self.server_ranks = [server_rank] if isinstance(server_rank, int) else list(server_rank)
    self.producer_ids = [producer_id] if isinstance(producer_id, int) else list(producer_id)
    if len(self.server_ranks) != len(self.producer_ids):
      raise ValueError(
        f'{len(self.server_ranks)} servers but {len(self.producer_ids)} producer ids'
      )
    if not isinstance(prefetch_size, int) or prefetch_size < 1:
      raise ValueError(f'prefetch_size must be a positive integer, got {prefetch_size!r}')
    if fetch is None:
      raise ValueError(
        'RemoteReceivingChannel needs fetch, the request for a batch: the distributed '
        "loaders give their client's"
      )
    self.prefetch_size = prefetch_size
    self.fetch = fetch
    self._arrived: queue.SimpleQueue = queue.SimpleQueue()
    self._lock = threading.Lock()
    self._idle = threading.Condition(self._lock)
    self._unrequested = [0] * len(self.server_ranks)
    self._in_flight = 0
    self._expected = 0

  def reset(self, num_batches: Optional[Sequence[int]] = None) -> None:
    r"""Starts receiving an epoch of ``num_batches[i]`` batches from server
    ``i`` (none by default). Call ``drain`` first when the last epoch was
    left unfinished."""
    counts = [0] * len(self.server_ranks) if num_batches is None else list(num_batches)
    if len(counts) != len(self.server_ranks):
      raise ValueError(f'{len(counts)} batch counts for {len(self.server_ranks)} servers')
    with self._lock:
      if self._in_flight:
        raise RuntimeError('requests of the last epoch are in flight: drain() first')
      self._arrived = queue.SimpleQueue()
      self._unrequested = counts
      self._expected = sum(counts)
    for i in range(len(self.server_ranks)):
      for _ in range(min(self.prefetch_size, counts[i])):
        self._request(i)

  def drain(self, timeout: Optional[float] = None) -> bool:
    r"""Sends no more requests and waits until those in flight are answered
    (their batches are dropped); returns False on timeout."""
    with self._lock:
      self._unrequested = [0] * len(self.server_ranks)
      self._expected = 0
      return self._idle.wait_for(lambda: self._in_flight == 0, timeout)

  def _request(self, i: int) -> None:
    with self._lock:
      if self._unrequested[i] == 0:
        return
      self._unrequested[i] -= 1
      self._in_flight += 1
    try:
      fut = self.fetch(self.server_ranks[i], self.producer_ids[i])
    except Exception as e:
      fut = torch.futures.Future()
      fut.set_exception(e)
    fut.add_done_callback(lambda f: self._answered(i, f))

  def _answered(self, i: int, fut: torch.futures.Future) -> None:
    try:
      fut.value()
      failed = False
    except Exception:  # recv raises it
      failed = True
    self._arrived.put((i, fut))
    with self._lock:
      self._in_flight -= 1
      if failed:  # ask that server no more
        self._unrequested[i] = 0
      self._idle.notify_all()
    self._request(i)

  def send(self, msg: SampleMessage, **kwargs) -> None:
    raise RuntimeError('a RemoteReceivingChannel only receives: servers produce its batches')

  def recv(self, timeout_ms: Optional[float] = None, **kwargs) -> SampleMessage:
    r"""The next batch to arrive.

    Raises:
      QueueTimeoutError: none arrived within ``timeout_ms``.
      RuntimeError: a server failed to send it (it died, or its request
        failed), or every batch of the epoch was received.
    """
    with self._lock:
      if self._expected == 0:
        raise RuntimeError('every batch of this epoch was received')
      self._expected -= 1
    try:
      i, fut = self._arrived.get(timeout=None if timeout_ms is None else timeout_ms / 1000)
    except queue.Empty:
      raise QueueTimeoutError(
        f'no batch arrived from servers {self.server_ranks} within {timeout_ms} ms'
      ) from None
    try:
      return fut.value()
    except Exception as e:
      raise RuntimeError(
        f'server {self.server_ranks[i]} failed to send a batch: {type(e).__name__}: {e}'
      ) from e
