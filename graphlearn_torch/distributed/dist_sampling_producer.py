"""Sampling producers: where a distributed loader's batches are sampled.

``DistMpSamplingProducer`` spawns sampling processes that form an RPC world
of their own and send finished batches into the trainer's ShmChannel; each
epoch, the trainer hands every process its share of the seed batches.
``DistServerSamplingProducer`` samples a client's batches on a server and
holds them until the client fetches them.
"""

import collections
import functools
import logging
import multiprocessing
import os
import pickle
import threading
import time
import traceback
from enum import Enum
from multiprocessing import connection as mp_connection
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import List, Optional, Union

import torch

from ..channel import ChannelBase, ChannelClosedError, SampleMessage
from ..loader.base import SeedBatcher
from ..sampler.base import EdgeSamplerInput, NodeSamplerInput, SamplingConfig
from .dist_context import get_context, init_worker_group
from .dist_dataset import DistDataset
from .dist_neighbor_sampler import DistNeighborSampler
from .dist_options import MpDistSamplingWorkerOptions, RemoteDistSamplingWorkerOptions
from .partition_service import PartitionService
from .rpc import init_rpc, shutdown_rpc

logger = logging.getLogger(__name__)

SAMPLING_GROUP = '_sampling_worker'
INPUT_ID_KEY = '#input_id'
ERROR_KEY = '#error'
# How often an idle sampling process checks that its trainer still lives.
PARENT_CHECK_S = 1.0


class MpCommand(Enum):
  SAMPLE_ALL = 0
  STOP = 1


def error_message(text: str) -> SampleMessage:
  r"""A message that carries a sampling process's error to the trainer."""
  return {ERROR_KEY: torch.frombuffer(bytearray(text.encode()), dtype=torch.uint8)}


def raise_if_error(msg: SampleMessage) -> None:
  if ERROR_KEY in msg:
    text = bytes(msg[ERROR_KEY].tolist()).decode(errors='replace')
    raise RuntimeError(f'a sampling process failed:\n{text}')


async def _tagged(coro, index: torch.Tensor) -> SampleMessage:
  msg = await coro
  msg[INPUT_ID_KEY] = index
  return msg


# Seconds the sampling processes get to stop after a failure before they are killed.
NON_GRACEFUL_STOP_S = 2.0


def _sampling_worker_loop(
  rank: int,
  world_size: int,
  data_payload: bytes,
  sampler_input: Union[NodeSamplerInput, EdgeSamplerInput],
  config: SamplingConfig,
  options: MpDistSamplingWorkerOptions,
  channel: ChannelBase,
  tasks: Connection,
  status: Connection,
  parent_pid: int,
) -> None:
  torch.set_num_threads(1)
  sampler = None
  graceful = True  # peers may still need this partition: leave together
  try:
    # Unpickled here rather than by the spawn bootstrap, so that a partition
    # that fails to load is reported to the trainer with its cause.
    data: DistDataset = pickle.loads(data_payload)
    init_worker_group(world_size, rank, SAMPLING_GROUP)
    init_rpc(
      options.master_addr, options.master_port, options.num_rpc_threads or 4, options.rpc_timeout
    )
    seed = None if config.seed is None else config.seed + rank
    sampler = DistNeighborSampler.from_config(
      data, config, seed, channel=channel, concurrency=options.worker_concurrency
    )
    status.send(('ready', rank, None))

    trainer_gone = threading.Event()

    def deliver(msg: SampleMessage) -> None:
      try:
        channel.send(msg)
      except ChannelClosedError:
        trainer_gone.set()

    def report(error: BaseException) -> None:
      if trainer_gone.is_set():
        return
      text = ''.join(traceback.format_exception(type(error), error, error.__traceback__))
      deliver(error_message(f'sampling process {rank} (pid {os.getpid()}):\n{text}'))

    while True:
      if not tasks.poll(PARENT_CHECK_S):
        if os.getppid() != parent_pid:
          logger.error('sampling process %d: its trainer exited; stopping', rank)
          graceful = False
          return
        continue
      command, batches = tasks.recv()
      if command == MpCommand.STOP:
        graceful = bool(batches)  # STOP carries whether to wait for the peers
        return
      for index in batches:
        if trainer_gone.is_set():
          break
        coro = _tagged(sampler.sample_coroutine(config.sampling_type, sampler_input[index]), index)
        sampler.add_task(coro, callback=deliver, on_error=report)
      sampler.wait_all()
      if trainer_gone.is_set():
        logger.error('sampling process %d: its trainer exited; stopping', rank)
        graceful = False
        return
  except Exception:
    graceful = False
    text = traceback.format_exc()
    try:
      status.send(('error', rank, text))
    except OSError:  # the trainer is gone
      pass
    try:
      channel.send(error_message(f'sampling process {rank} (pid {os.getpid()}):\n{text}'), 1000)
    except Exception:  # the trainer is gone or the channel full: status has it
      pass
  finally:
    if sampler is not None:
      sampler.shutdown_loop()
    shutdown_rpc(graceful=graceful, timeout=options.rpc_timeout)


class DistMpSamplingProducer:
  r"""Runs a loader's sampling in spawned processes.

  Args:
    data: this trainer's partition.
    sampler_input: this trainer's seeds.
    sampling_config: what to sample and how to batch it.
    worker_options: how many processes, where they meet.
    output_channel: where they send batches.
  """

  def __init__(
    self,
    data: DistDataset,
    sampler_input: Union[NodeSamplerInput, EdgeSamplerInput],
    sampling_config: SamplingConfig,
    worker_options: MpDistSamplingWorkerOptions,
    output_channel: ChannelBase,
  ):
    self.data = data
    self.sampler_input = sampler_input
    self.sampling_config = sampling_config
    self.worker_options = worker_options
    self.output_channel = output_channel
    self.num_workers = worker_options.num_workers
    self._batcher = SeedBatcher.from_config(len(sampler_input), sampling_config)
    # Pipes, not queues: they hold no named semaphores that a killed process
    # would leave behind in /dev/shm.
    self._procs: List[multiprocessing.Process] = []
    self._tasks: List[Connection] = []
    self._status: List[Connection] = []

  def init(self) -> None:
    r"""Starts the sampling processes and waits until all are ready (they
    meet the other trainers' sampling processes first)."""
    ctx = get_context()
    ctx_mp = multiprocessing.get_context('spawn')
    world_size = ctx.world_size * self.num_workers
    for i in range(self.num_workers):
      task_reader, task_writer = ctx_mp.Pipe(duplex=False)
      status_reader, status_writer = ctx_mp.Pipe(duplex=False)
      proc = ctx_mp.Process(
        target=_sampling_worker_loop,
        args=(
          ctx.rank * self.num_workers + i,
          world_size,
          bytes(ForkingPickler.dumps(self.data)),  # one per process: shared fds go once
          self.sampler_input,
          self.sampling_config,
          self.worker_options,
          self.output_channel,
          task_reader,
          status_writer,
          os.getpid(),
        ),
        daemon=True,
        name=f'glt-sampler-{ctx.rank}-{i}',
      )
      proc.start()
      task_reader.close()
      status_writer.close()
      self._tasks.append(task_writer)
      self._status.append(status_reader)
      self._procs.append(proc)
    try:
      self._wait_ready()
    except BaseException:
      self.shutdown(graceful=False)
      raise

  def _wait_ready(self) -> None:
    r"""Waits for every sampling process's start-up report, all at once: the
    first failure (an error, or a process that died) is raised as soon as it
    happens, naming the process and its cause."""
    timeout = self.worker_options.rpc_timeout
    deadline = time.monotonic() + timeout
    waiting = dict(zip(self._status, self._procs))
    while waiting:
      ready = mp_connection.wait(list(waiting), max(0.0, deadline - time.monotonic()))
      if not ready:
        names = ', '.join(p.name for p in waiting.values())
        raise TimeoutError(
          f'the sampling processes {names} were not ready within {timeout} s: they wait for the '
          f"other trainers' sampling processes at {self.worker_options.master_addr}:"
          f'{self.worker_options.master_port} (did every trainer create its loader?)'
        )
      for status in ready:
        proc = waiting.pop(status)
        try:
          kind, rank, text = status.recv()
        except EOFError:  # it died before it could say why
          proc.join(1)
          raise RuntimeError(
            f'sampling process {proc.name} (pid {proc.pid}) died at start-up with exit code '
            f'{proc.exitcode}'
          ) from None
        if kind == 'error':
          raise RuntimeError(f'sampling process {rank} failed to start:\n{text}')

  def __len__(self) -> int:
    return len(self._batcher)

  def produce_all(self) -> int:
    r"""Starts an epoch: hands out this epoch's batches (reshuffled); returns
    how many batches will arrive."""
    batches = list(self._batcher)
    for i, tasks in enumerate(self._tasks):
      tasks.send((MpCommand.SAMPLE_ALL, batches[i :: self.num_workers]))
    return len(batches)

  def shutdown(self, graceful: bool = True, timeout: Optional[float] = None) -> None:
    r"""Stops the sampling processes (idempotent).

    Args:
      graceful: leave the samplers' RPC world together with the other
        trainers' samplers, which may still need this partition (waits until
        every trainer's loader is shut down); False after a failure: leave at
        once.
      timeout: the longest wait for all of them together (default: the RPC
        timeout plus 10 s when graceful, else 2 s: after a failure a sampler
        may be stuck in a request to a dead peer); then they are killed.
    """
    if timeout is None:
      timeout = self.worker_options.rpc_timeout + 10 if graceful else NON_GRACEFUL_STOP_S
    for tasks in self._tasks:
      try:
        tasks.send((MpCommand.STOP, graceful))
      except (ValueError, OSError):  # the process is already gone
        pass
    deadline = time.monotonic() + timeout
    for proc in self._procs:
      proc.join(max(0.0, deadline - time.monotonic()))
      if proc.is_alive():
        logger.warning('sampling process %s did not stop; killing it', proc.name)
        proc.kill()
        proc.join()
    for conn in self._tasks + self._status:
      conn.close()
    self._procs, self._tasks, self._status = [], [], []


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
    # One place more than the batches in flight: a finished batch holds its
    # place until its callback returns, and the callback starts the next.
    self.sampler = DistNeighborSampler.from_config(
      service.data, cfg, concurrency=self.concurrency + 1, service=service
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
        self.sampling_config.sampling_type, self.sampler_input[index]
      )
      self.sampler.add_task(
        _tagged(coro, index + self.input_offset),
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
    self._finished(epoch, error_message(f'{summary}\n{text}'))

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
