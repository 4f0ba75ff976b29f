"""Server-side sampling: a client loader's batches sampled on a server,
ahead of the client's requests (server-client mode)."""

import collections
import functools
import os
import threading
import traceback
from typing import Union

import torch

from ...batch.codec import encode_error
from ...batch.seeds import SeedBatcher
from ...channel import SampleMessage
from ...sampler.base import EdgeSamplerInput, NodeSamplerInput, SamplingConfig
from ..runtime.context import get_context
from ..sampling.neighbor_sampler import DistNeighborSampler
from ..sampling.partition_service import PartitionService
from .options import RemoteDistSamplingWorkerOptions


def message_nbytes(msg: SampleMessage) -> int:
  return sum(t.numel() * t.element_size() for t in msg.values())


class DistServerSamplingProducer:
  r"""Samples one client loader's batches on a server, ahead of its requests.

  Batches run on the sampler's event loop, ``num_workers *
  worker_concurrency`` at a time, and wait in a buffer (at most
  ``buffer_capacity`` batches and ``buffer_size`` bytes) until the client
  fetches them. A fetch that finds the buffer empty is answered by the next
  batch to finish, so no RPC thread waits.

  Args:
    service: the server's PartitionService.
    sampler_input: the seeds (the server's partition's, for a remote input).
    sampling_config: what to sample and how to batch it.
    worker_options: concurrency and buffer bounds.
    input_offset: added to the input ids the batches carry (the position of
      this server's seeds among the loader's).
  """

  def __init__(
    self,
    service: PartitionService,
    sampler_input: Union[NodeSamplerInput, EdgeSamplerInput],
    sampling_config: SamplingConfig,
    worker_options: RemoteDistSamplingWorkerOptions,
    input_offset: int = 0,
  ):
    cfg = sampling_config
    self.sampler_input = sampler_input
    self.sampling_config = cfg
    self.input_offset = int(input_offset)
    self.concurrency = worker_options.num_workers * worker_options.worker_concurrency
    self.buffer_capacity = max(worker_options.buffer_capacity, self.concurrency)
    self.buffer_size = worker_options.buffer_size
    # A batch counts in _in_flight from before its add_task until its
    # callback, and holds its place in the loop for less: _fill's add_task
    # never waits, also when a callback (in the loop's thread) calls it.
    self.sampler = DistNeighborSampler.from_config(
      service.data, cfg, concurrency=self.concurrency, service=service
    )
    self._batcher = SeedBatcher.from_config(len(sampler_input), cfg)
    self._lock = threading.Lock()
    self._epoch = -1
    self._todo: collections.deque = collections.deque()
    self._ready: collections.deque = collections.deque()
    self._ready_bytes = 0
    self._waiters: collections.deque = collections.deque()
    self._in_flight = 0
    self._closed = False

  def __len__(self) -> int:
    return len(self._batcher)

  def start_epoch(self, epoch: int) -> int:
    r"""Starts sampling epoch ``epoch`` (a repeated or older epoch is a
    no-op); drops what is left of the last one. Returns the epoch's number
    of batches."""
    with self._lock:
      if self._closed:
        raise RuntimeError('the sampling producer is destroyed')
      if epoch <= self._epoch:
        return len(self._batcher)
      self._epoch = epoch
      self._todo = collections.deque(self._batcher)
      self._ready.clear()
      self._ready_bytes = 0
      stale, self._waiters = self._waiters, collections.deque()
    for waiter in stale:
      waiter.set_exception(RuntimeError(f'epoch {epoch} started before this batch came'))
    self._fill()
    return len(self._batcher)

  def _fill(self) -> None:
    r"""Starts batches while there is room in flight and in the buffer."""
    while True:
      with self._lock:
        full = (
          self._in_flight >= self.concurrency
          or self._in_flight + len(self._ready) >= self.buffer_capacity
          or (self.buffer_size is not None and self._ready_bytes >= self.buffer_size)
        )
        if self._closed or full or not self._todo:
          return
        index = self._todo.popleft()
        self._in_flight += 1
        epoch = self._epoch
      coro = self.sampler.sample_coroutine(
        self.sampling_config.sampling_type, self.sampler_input[index], index + self.input_offset
      )
      self.sampler.add_task(
        coro,
        callback=functools.partial(self._finished, epoch),
        on_error=functools.partial(self._failed, epoch),
      )

  def _finished(self, epoch: int, msg: SampleMessage) -> None:
    waiter = None
    with self._lock:
      self._in_flight -= 1
      if epoch != self._epoch or self._closed:
        msg = None  # a batch of an abandoned epoch
      elif self._waiters:
        waiter = self._waiters.popleft()
      else:
        self._ready.append(msg)
        self._ready_bytes += message_nbytes(msg)
    if waiter is not None:
      waiter.set_result(msg)
    self._fill()

  def _failed(self, epoch: int, error: BaseException) -> None:
    text = ''.join(traceback.format_exception(type(error), error, error.__traceback__))
    where = f'server {get_context().rank} (pid {os.getpid()})'
    summary = f'{where} failed to sample a batch: {type(error).__name__}: {error}'
    self._finished(epoch, encode_error(f'{summary}\n{text}'))

  def fetch(self) -> torch.futures.Future:
    r"""A future of the next sampled batch of this epoch."""
    fut = torch.futures.Future()
    error = msg = None
    with self._lock:
      if self._closed:
        error = RuntimeError('the sampling producer is destroyed')
      elif self._ready:
        msg = self._ready.popleft()
        self._ready_bytes -= message_nbytes(msg)
      elif not self._todo and self._in_flight == len(self._waiters):
        error = RuntimeError(f'every batch of epoch {self._epoch} was already fetched')
      else:
        self._waiters.append(fut)
    if error is not None:
      fut.set_exception(error)
    elif msg is not None:
      fut.set_result(msg)
    self._fill()
    return fut

  def shutdown(self, timeout: float = 30.0) -> None:
    r"""Stops sampling and drops the buffer; pending fetches fail."""
    with self._lock:
      self._closed = True
      self._todo.clear()
      self._ready.clear()
      self._ready_bytes = 0
      stale, self._waiters = self._waiters, collections.deque()
    for waiter in stale:
      waiter.set_exception(RuntimeError('the sampling producer was destroyed'))
    self.sampler.shutdown_loop(timeout)
