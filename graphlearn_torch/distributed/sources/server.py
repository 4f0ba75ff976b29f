"""Server-side sampling: a client loader's batches sampled on a server,
ahead of the client's requests (server-client mode)."""

import collections
import functools
import os
import threading
import traceback
from typing import Dict, Optional, Union

import torch

from ...batch.codec import encode_error, place_batch
from ...batch.seeds import SeedBatcher
from ...channel import ChannelBase, SampleMessage, message_nbytes
from ...sampler.base import EdgeSamplerInput, NodeSamplerInput, SamplingConfig
from ...sampler.schema import RandomStream
from ..runtime.context import get_context
from ..runtime.event_loop import ConcurrentEventLoop
from ..sampling.partition_service import PartitionService
from .messages import MessageSampler
from .options import RemoteDistSamplingWorkerOptions
from .sampling_process import ProducerSpec
from .server_pool import ServerSamplingPool


class InServerSampling:
  r"""A producer's batches sampled in the server's own process, on an event
  loop of the producer's own, ``concurrency`` at a time: the in-process
  counterpart of the server's ``ServerSamplingPool`` (``create``,
  ``sample``, ``destroy``), for ``num_workers=1``.

  Args:
    service: the server's PartitionService.
    concurrency: batches in flight at once.
  """

  def __init__(self, service: PartitionService, concurrency: int):
    self.service = service
    self.loop = ConcurrentEventLoop(concurrency)
    self._spec: Optional[ProducerSpec] = None
    self._messages: Optional[MessageSampler] = None

  def create(self, producer: int, spec: ProducerSpec) -> None:
    r"""Samples ``spec`` (this loop's only producer)."""
    self._spec = spec
    data = self.service.data
    self._messages = MessageSampler.from_config(data, spec.config, service=self.service)

  def sample(
    self, producer: int, seed: int, epoch: int, position: int, index: torch.Tensor, deliver
  ) -> None:
    r"""Samples batch ``position`` of ``epoch`` (seeds ``index``, stream
    ``seed``); ``deliver`` gets its message, or an error message. A
    batch holds its place in the loop until just before ``deliver`` runs, so
    a ``deliver`` that starts the next batch never waits."""
    spec = self._spec
    random = RandomStream.for_batch(seed, epoch, position, *spec.stream_keys)
    inputs = spec.sampler_input[index]
    coro = self._messages.message(
      spec.config.sampling_type, inputs, index + spec.input_offset, random
    )
    self.loop.add_task(coro, callback=deliver, on_error=lambda e: deliver(_error_message(e)))

  def destroy(self, producer: int, timeout: float = 30.0) -> None:
    r"""Stops the loop."""
    self.loop.shutdown_loop(timeout)


def _error_message(error: BaseException) -> SampleMessage:
  r"""The message of a batch that failed to sample in this server."""
  text = ''.join(traceback.format_exception(type(error), error, error.__traceback__))
  where = f'server {get_context().rank} (pid {os.getpid()})'
  summary = f'{where} failed to sample a batch: {type(error).__name__}: {error}'
  return encode_error(f'{summary}\n{text}')


class DistServerSamplingProducer:
  r"""Samples one client loader's batches on a server, ahead of its requests.

  Batches run ``num_workers * worker_concurrency`` at a time, in the
  server's sampling processes (``pool``) or else on an event loop of the
  producer's own, and wait in a buffer (at most ``buffer_capacity`` batches
  and ``buffer_size`` bytes) until the client fetches them. A fetch that
  finds the buffer empty is answered by the next batch to finish, so no RPC
  thread waits.

  Args:
    service: the server's PartitionService.
    sampler_input: the seeds (the server's partition's, for a remote input).
    sampling_config: what to sample and how to batch it.
    worker_options: concurrency and buffer bounds.
    input_offset: added to the input ids the batches carry (the position of
      this server's seeds among the loader's).
    pool: the server's sampling processes, to sample in (default: sample
      in this process).
    producer_id: the producer's id on its server (names it to the pool).
    channel: the client loader's channel on this host, where the pool's
      processes send batches straight (see ``ProducerSpec``).
  """

  def __init__(
    self,
    service: PartitionService,
    sampler_input: Union[NodeSamplerInput, EdgeSamplerInput],
    sampling_config: SamplingConfig,
    worker_options: RemoteDistSamplingWorkerOptions,
    input_offset: int = 0,
    pool: Optional[ServerSamplingPool] = None,
    producer_id: int = 0,
    channel: Optional[ChannelBase] = None,
  ):
    cfg = sampling_config.seeded()
    self.sampler_input = sampler_input
    self.sampling_config = cfg
    self.input_offset = int(input_offset)
    self.concurrency = worker_options.num_workers * worker_options.worker_concurrency
    self.buffer_capacity = max(worker_options.buffer_capacity, self.concurrency)
    self.buffer_size = worker_options.buffer_size
    # A batch counts in _in_flight from before it is handed to the sampling
    # until it is delivered.
    self.producer_id = producer_id
    self.sampling = pool if pool is not None else InServerSampling(service, self.concurrency)
    offset = self.input_offset  # in each batch's random stream and input ids
    self.sampling.create(producer_id, ProducerSpec(sampler_input, cfg, (offset,), offset, channel))
    self._batcher = SeedBatcher.from_config(len(sampler_input), cfg)
    self._lock = threading.Lock()
    self._epoch, self._start = -1, 0
    self._todo: collections.deque = collections.deque()  # (position, seed positions)
    self._done: Dict[int, SampleMessage] = {}  # sampled, not fetched, by position
    self._done_bytes = 0
    self._next_position = 0  # the batch the next fetch gets
    self._waiters: collections.deque = collections.deque()  # fetches, in order
    self._in_flight = 0
    self._closed = False

  def __len__(self) -> int:
    return len(self._batcher)

  def start_epoch(self, epoch: int, start: int = 0, seed: Optional[int] = None) -> int:
    r"""Starts sampling epoch ``epoch`` from batch position ``start`` (a
    repeated or older epoch is a no-op); drops what is left of the last one.
    Returns how many batches the epoch has from ``start`` on.

    Args:
      epoch: the epoch.
      start: its first batch position to sample.
      seed: the client loader's seed from now on (default: the config's).
    """
    with self._lock:
      if self._closed:
        raise RuntimeError('the sampling producer is destroyed')
      if epoch <= self._epoch:
        return len(self._batcher) - self._start
      if seed is not None:
        self._batcher.seed = seed  # shuffles and seeds the batches' streams
      self._epoch, self._start = epoch, start
      self._todo = collections.deque(self._batcher.batches(epoch, start))
      self._done.clear()
      self._done_bytes = 0
      self._next_position = start
      stale, self._waiters = self._waiters, collections.deque()
    for waiter in stale:
      waiter.set_exception(RuntimeError(f'epoch {epoch} started before this batch came'))
    self._fill()
    return len(self._batcher) - start

  def _fill(self) -> None:
    r"""Starts batches while there is room in flight and in the buffer."""
    while True:
      with self._lock:
        full = (
          self._in_flight >= self.concurrency
          or self._in_flight + len(self._done) >= self.buffer_capacity
          or (self.buffer_size is not None and self._done_bytes >= self.buffer_size)
        )
        if self._closed or full or not self._todo:
          return
        position, index = self._todo.popleft()
        self._in_flight += 1
        epoch = self._epoch
      done = functools.partial(self._finished, epoch, position)
      self.sampling.sample(self.producer_id, self._batcher.seed, epoch, position, index, done)

  def _finished(self, epoch: int, position: int, msg: SampleMessage) -> None:
    answered = []
    with self._lock:
      self._in_flight -= 1
      if epoch == self._epoch and not self._closed:  # else a batch of an abandoned epoch
        self._done[position] = place_batch(msg, epoch, position)
        self._done_bytes += message_nbytes(msg)
        while self._waiters and self._next_position in self._done:
          answered.append((self._waiters.popleft(), self._take_next()))
    for waiter, ready in answered:
      waiter.set_result(ready)
    self._fill()

  def _take_next(self) -> SampleMessage:
    r"""Takes the batch due next out of the buffer (the lock is held)."""
    msg = self._done.pop(self._next_position)
    self._done_bytes -= message_nbytes(msg)
    self._next_position += 1
    return msg

  def fetch(self) -> torch.futures.Future:
    r"""A future of this epoch's next batch, in batch order."""
    fut = torch.futures.Future()
    error = msg = None
    with self._lock:
      unclaimed = len(self._batcher) - self._next_position - len(self._waiters)
      if self._closed:
        error = RuntimeError('the sampling producer is destroyed')
      elif not self._waiters and self._next_position in self._done:
        msg = self._take_next()
      elif unclaimed <= 0:
        error = RuntimeError(f'every batch of epoch {self._epoch} was already fetched')
      else:
        self._waiters.append(fut)
    if error is not None:
      fut.set_exception(error)
    elif msg is not None:
      fut.set_result(msg)
    self._fill()
    return fut

  def shutdown(self) -> None:
    r"""Stops sampling and drops the buffer; pending fetches fail."""
    with self._lock:
      self._closed = True
      self._todo.clear()
      self._done.clear()
      self._done_bytes = 0
      stale, self._waiters = self._waiters, collections.deque()
    for waiter in stale:
      waiter.set_exception(RuntimeError('the sampling producer was destroyed'))
    self.sampling.destroy(self.producer_id)
