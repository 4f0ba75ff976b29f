"""RemoteReceivingChannel: a client's end of the batches its servers sample."""

import collections
import logging
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
  ``prefetch_size`` batches requested ahead from each server: a server is
  asked for another when one of its batches is received.

  Args:
    server_rank: the server (or servers).
    producer_id: the producer on each server.
    prefetch_size: batches requested ahead from each server.
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
    num_servers = len(self.server_ranks)
    self._lock = threading.Lock()
    self._changed = threading.Condition(self._lock)
    self._arrived: List[collections.deque] = [collections.deque() for _ in range(num_servers)]
    self._unrequested = [0] * num_servers
    self._unreceived = [0] * num_servers
    self._in_flight = 0
    self._generation = 0  # answers of an earlier epoch's requests are dropped

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
      self._generation += 1
      for arrived in self._arrived:
        arrived.clear()
      self._unrequested = list(counts)
      self._unreceived = list(counts)
    for i in range(len(self.server_ranks)):
      for _ in range(min(self.prefetch_size, counts[i])):
        self._request(i)

  def drain(self, timeout: Optional[float] = None) -> bool:
    r"""Sends no more requests and waits until those in flight are answered
    (their batches are dropped); returns False on timeout."""
    with self._lock:
      self._unrequested = [0] * len(self.server_ranks)
      self._unreceived = [0] * len(self.server_ranks)
      return self._changed.wait_for(lambda: self._in_flight == 0, timeout)

  def _request(self, i: int) -> None:
    with self._lock:
      if self._unrequested[i] == 0:
        return
      self._unrequested[i] -= 1
      self._in_flight += 1
      generation = self._generation
    try:
      fut = self.fetch(self.server_ranks[i], self.producer_ids[i])
    except Exception as e:
      fut = torch.futures.Future()
      fut.set_exception(e)
    fut.add_done_callback(lambda f: self._answered(i, generation, f))

  def _answered(self, i: int, generation: int, fut: torch.futures.Future) -> None:
    try:
      fut.value()
      failed = False
    except Exception:  # recv raises it
      failed = True
    with self._lock:
      self._in_flight -= 1
      if generation == self._generation:
        self._arrived[i].append(fut)
        if failed:  # ask that server no more
          self._unrequested[i] = 0
      self._changed.notify_all()

  def send(self, msg: SampleMessage, **kwargs) -> None:
    raise RuntimeError('a RemoteReceivingChannel only receives: servers produce its batches')

  def recv(
    self, timeout_ms: Optional[float] = None, server: Optional[int] = None, **kwargs
  ) -> SampleMessage:
    r"""The next batch to arrive from server ``server`` (an index into
    ``server_rank``), or from any server when None; that server is asked
    for another.

    Raises:
      QueueTimeoutError: none arrived within ``timeout_ms``.
      RuntimeError: a server failed to send it (it died, or its request
        failed), or every batch of the epoch (of that server) was received.
    """
    servers = range(len(self.server_ranks)) if server is None else [server]
    with self._lock:
      if not any(self._unreceived[i] for i in servers):
        what = 'this epoch' if server is None else f'server {self.server_ranks[server]} this epoch'
        raise RuntimeError(f'every batch of {what} was received')
      arrived = self._changed.wait_for(
        lambda: [i for i in servers if self._arrived[i]],
        None if timeout_ms is None else timeout_ms / 1000,
      )
      if not arrived:
        raise QueueTimeoutError(
          f'no batch arrived from servers {[self.server_ranks[i] for i in servers]} within '
          f'{timeout_ms} ms'
        )
      ready = arrived[0]
      fut = self._arrived[ready].popleft()
      self._unreceived[ready] -= 1
    self._request(ready)
    try:
      return fut.value()
    except Exception as e:
      raise RuntimeError(
        f'server {self.server_ranks[ready]} failed to send a batch: {type(e).__name__}: {e}'
      ) from e
