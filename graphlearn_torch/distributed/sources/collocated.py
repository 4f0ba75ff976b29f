"""Collocated sampling: a loader's batches sampled in the training process."""

import asyncio
import collections
import concurrent.futures
from typing import Callable, Coroutine, Optional, Union

import torch

from ...batch.seeds import SeedBatcher
from ...channel import SampleMessage
from ...sampler.base import EdgeSamplerInput, NodeSamplerInput, SamplingConfig
from ...sampler.schema import RandomStream
from ..data.dataset import DistDataset
from ..runtime.event_loop import (
  ConcurrentEventLoop,
  loop_runs_here,
  result_within,
  run_in_this_thread,
)
from ..runtime.rpc import init_rpc, rpc_is_initialized
from .base import BatchSource
from .messages import MessageSampler
from .options import CollocatedDistSamplingWorkerOptions


class DistCollocatedSamplingProducer(BatchSource):
  r"""Samples a loader's batches in the training process, on an event loop
  of its own, with ``worker_options.prefetch_size`` batches sampled ahead
  while the trainer works on the current one (0: each batch is sampled when
  it is asked for).

  Args:
    data: this process's partition.
    sampler_input: this process's seeds.
    sampling_config: what to sample and how to batch it.
    worker_options: the RPC world to join if not joined yet, and the
      prefetch depth.
    device: where the loader wants its batches: on a GPU, a batch sampled
      on it stays there (``MessageSampler``'s ``on_device``); else
      batches leave the sampler on the host.
  """

  def __init__(
    self,
    data: DistDataset,
    sampler_input: Union[NodeSamplerInput, EdgeSamplerInput],
    sampling_config: SamplingConfig,
    worker_options: CollocatedDistSamplingWorkerOptions,
    device: Optional[torch.device] = None,
  ):
    self.data = data
    self.sampler_input = sampler_input
    self.sampling_config = sampling_config.seeded()
    self.worker_options = worker_options
    self.device = device
    self.prefetch_size = worker_options.prefetch_size
    self.messages: Optional[MessageSampler] = None
    self.loop: Optional[ConcurrentEventLoop] = None
    # Without prefetching, a batch is sampled on the calling thread, on a
    # loop of its own: handing it to the loop's thread and back costs about
    # 0.1 ms and overlaps nothing.
    self._loop_here: Optional[asyncio.AbstractEventLoop] = None
    self._batcher = SeedBatcher.from_config(len(sampler_input), self.sampling_config)
    self._epoch = -1
    self._batches = iter(())
    self._pending: collections.deque = collections.deque()

  def init(self, meanwhile: Optional[Callable[[], None]] = None) -> None:
    r"""Joins the RPC world if needed and builds the sampler (collective:
    every process of the group builds its sampler at the same point), then
    runs ``meanwhile`` (nothing to overlap it with here)."""
    opts = self.worker_options
    if not rpc_is_initialized():
      if opts.master_addr is None or opts.master_port is None:
        raise ValueError(
          'RPC is not initialized: call glt.distributed.init_rpc first, or give the worker '
          'options master_addr and master_port'
        )
      init_rpc(opts.master_addr, opts.master_port, opts.num_rpc_threads or 16, opts.rpc_timeout)
    on_device = self.device is not None and torch.device(self.device).type == 'cuda'
    self.messages = MessageSampler.from_config(self.data, self.sampling_config, on_device=on_device)
    self.loop = ConcurrentEventLoop(self.prefetch_size + 1)
    if self.prefetch_size == 0:
      self._loop_here = asyncio.new_event_loop()
    if meanwhile is not None:
      meanwhile()

  def __len__(self) -> int:
    return len(self._batcher)

  def start_epoch(
    self, epoch: Optional[int] = None, start: int = 0, seed: Optional[int] = None
  ) -> int:
    self._drop_pending()
    if seed is not None:
      self._batcher.seed = seed  # shuffles and seeds the batches' streams
    self._epoch = self._epoch + 1 if epoch is None else epoch
    self._batches = self._batcher.batches(self._epoch, start)
    self._sample_ahead(self.prefetch_size)
    return len(self._batcher) - start

  def _next_sampling(self) -> Optional[Coroutine]:
    r"""The coroutine that samples the epoch's next batch, or None after
    the last."""
    position, index = next(self._batches, (None, None))
    if index is None:
      return None
    random = RandomStream.for_batch(self._batcher.seed, self._epoch, position)
    config = self.sampling_config
    return self.messages.message(config.sampling_type, self.sampler_input[index], index, random)

  def _sample_ahead(self, depth: int) -> None:
    r"""Starts the next batches until ``depth`` are in flight."""
    while len(self._pending) < depth:
      coro = self._next_sampling()
      if coro is None:
        return
      self._pending.append(self.loop.submit(coro))

  def next_message(self) -> Optional[SampleMessage]:
    if self._loop_here is not None and not self._pending and not loop_runs_here():
      coro = self._next_sampling()
      if coro is None:
        return None
      return run_in_this_thread(self._loop_here, coro, self.worker_options.rpc_timeout)
    self._sample_ahead(1)
    if not self._pending:
      return None
    msg = result_within(self._pending.popleft(), self.worker_options.rpc_timeout)
    self._sample_ahead(self.prefetch_size)  # sampled while the trainer uses this one
    return msg

  def _drop_pending(self) -> None:
    pending, self._pending = self._pending, collections.deque()
    for fut in pending:
      fut.cancel()
    concurrent.futures.wait(pending, self.worker_options.rpc_timeout)

  def shutdown(self) -> None:
    if self.loop is not None:
      self._drop_pending()
      self.loop.shutdown_loop()
      self.loop = self.messages = None
    if self._loop_here is not None:
      self._loop_here.close()
      self._loop_here = None
