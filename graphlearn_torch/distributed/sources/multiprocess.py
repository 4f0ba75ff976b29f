"""Multiprocess sampling: a loader's batches sampled in processes it starts.

The sampling processes form an RPC world of their own (every trainer's
processes together) and send finished batches into the trainer's
ShmChannel. The trainer hands the processes batches through pipes, a window
of them ahead of the one it yields next (as torch's DataLoader hands its
workers indices), and yields them in order: each batch draws from its own
random stream, so the batches are the same whoever samples them.
"""

import logging
import multiprocessing
import os
import time
from multiprocessing import connection as mp_connection
from multiprocessing import forkserver
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Callable, Dict, List, Optional, Union

import torch

from ...batch.codec import batch_place, raise_if_error
from ...batch.seeds import SeedBatcher
from ...channel import (
  ChannelBase,
  ChannelClosedError,
  QueueTimeoutError,
  SampleMessage,
  message_nbytes,
)
from ...sampler.base import EdgeSamplerInput, NodeSamplerInput, SamplingConfig
from ..data.dataset import DistDataset
from ..runtime.context import get_context
from ..runtime.rpc import process_has_rpc_agent
from .base import BatchSource, batch_wait_ms
from .options import MpDistSamplingWorkerOptions
from .sampling_process import MpCommand, run_sampling_process

logger = logging.getLogger(__name__)

# Seconds the sampling processes get to stop after a failure before they are killed.
NON_GRACEFUL_STOP_S = 2.0
# Milliseconds between checks on the stopping processes while their last
# batches are received and dropped.
STOP_POLL_MS = 100
# Seconds a sampling process gets to start (a fork server imports torch and
# this library, it loads its data) before it joins its RPC world; tens of
# seconds on a busy machine. A process that dies meanwhile is reported at once.
STARTUP_S = 30.0


def can_fork_sampling_processes(on_gpu: bool) -> bool:
  r"""Whether this trainer's sampling processes can be forked from it: they
  sample on the CPU, and the trainer has neither started CUDA (a forked
  process cannot use it) nor joined an RPC world (a forked process would
  carry its agent). A forked process starts in milliseconds with
  everything the trainer imported, as torch's DataLoader workers do.

  Args:
    on_gpu: whether the sampling processes sample on a GPU.
  """
  if on_gpu or 'fork' not in multiprocessing.get_all_start_methods():
    return False
  return not (torch.cuda.is_initialized() or process_has_rpc_agent())


def sampling_process_context(on_gpu: bool) -> multiprocessing.context.BaseContext:
  r"""Where a trainer's sampling processes start: forked from the trainer
  where that is safe (``can_fork_sampling_processes``); else from a fork
  server (one per trainer, started here, with its first loader) that
  imports torch, this library and the training script once, so that each
  process starts in milliseconds, where a spawned one imports them anew
  (seconds each, which the processes of a host pay together); spawned where
  there is no fork server.

  Args:
    on_gpu: whether the sampling processes sample on a GPU.
  """
  if can_fork_sampling_processes(on_gpu):
    return multiprocessing.get_context('fork')
  if 'forkserver' not in multiprocessing.get_all_start_methods():
    return multiprocessing.get_context('spawn')
  ctx = multiprocessing.get_context('forkserver')
  # '__main__' as the default has it: the script is imported once, too
  ctx.set_forkserver_preload(['__main__', run_sampling_process.__module__])
  forkserver.ensure_running()  # it imports while the trainer goes on
  return ctx


class DistMpSamplingProducer(BatchSource):
  r"""Runs a loader's sampling in processes of its own.

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
    self.sampling_config = sampling_config.seeded()
    self.worker_options = worker_options
    self.output_channel = output_channel
    self.num_workers = worker_options.num_workers
    self._batcher = SeedBatcher.from_config(len(sampler_input), self.sampling_config)
    # Pipes, not queues: they hold no named semaphores that a killed process
    # would leave behind in /dev/shm.
    self._procs: List[multiprocessing.Process] = []
    self._tasks: List[Connection] = []
    self._status: List[Connection] = []
    self._epoch = -1
    self._to_hand_out = iter(())  # (position, seed positions) not handed out yet
    self._handed_out_all = True
    self._next_to_hand_out = 0  # the position handed out next
    self._per_worker = [0] * self.num_workers  # handed out, not yet received, by process
    self._worker_of: Dict[int, int] = {}  # the process of each, by position
    self._arrived: Dict[int, SampleMessage] = {}  # came before their turn, by position
    self._held_in_channel: Dict[int, int] = {}  # those in the channel's memory: their bytes
    self._held_bytes = 0
    shm_size = getattr(output_channel, 'shm_size', None)  # a channel of bounded memory
    self._hold_budget = shm_size // 3 if shm_size is not None else float('inf')
    self._largest_batch = 0  # bytes of the largest batch received (for the timeout's error)
    self._next_position = 0  # the batch to yield next
    self._epoch_start = 0  # the epoch's first position
    self._remaining = 0  # batches of this epoch not yet yielded
    self._sampled = 0  # processes that sampled all of their share this epoch
    self._failed = False

  def init(self, meanwhile: Optional[Callable[[], None]] = None) -> None:
    r"""Starts the sampling processes, runs ``meanwhile`` and waits until
    all are ready (they meet the other trainers' sampling processes
    first)."""
    ctx = get_context()
    devices = self.worker_options.worker_devices or []
    ctx_mp = sampling_process_context(any(torch.device(d).type == 'cuda' for d in devices))
    forked = ctx_mp.get_start_method() == 'fork'
    world_size = ctx.world_size * self.num_workers
    for i in range(self.num_workers):
      task_reader, task_writer = ctx_mp.Pipe(duplex=False)
      status_reader, status_writer = ctx_mp.Pipe(duplex=False)
      proc = ctx_mp.Process(
        target=run_sampling_process,
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
          dict(os.environ),
          # a forked process closes the trainer's ends of the pipes it inherited
          [*self._tasks, task_writer, *self._status, status_reader] if forked else [],
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
      if meanwhile is not None:
        meanwhile()
      self._wait_ready()
    except BaseException:
      self.shutdown(graceful=False)
      raise

  def _wait_ready(self) -> None:
    r"""Waits for every sampling process's start-up report, all at once: the
    first failure (an error, or a process that died) is raised as soon as it
    happens, naming the process and its cause. Each process may take the RPC
    timeout to join its world, after ``STARTUP_S`` to start."""
    timeout = self.worker_options.rpc_timeout + STARTUP_S
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

  @property
  def depth(self) -> int:
    r"""Batches handed out and not yet received: every process's
    ``worker_concurrency`` in flight, and a channel's worth done (as deep as
    a whole epoch handed out at once and bounded by the channel)."""
    opts = self.worker_options
    return opts.num_workers * opts.worker_concurrency + opts.channel_capacity

  @property
  def _window(self) -> int:
    r"""Batches to keep in flight: one per process until the epoch's first
    batch is yielded (alone on its process, it comes a window's worth of
    batches sooner), then ``depth``."""
    return self.depth if self._next_position > self._epoch_start else self.num_workers

  @property
  def _in_flight(self) -> int:
    r"""Batches handed out and not yet received."""
    return sum(self._per_worker)

  def start_epoch(
    self, epoch: Optional[int] = None, start: int = 0, seed: Optional[int] = None
  ) -> int:
    self._drop_unyielded()
    if seed is not None:
      self._batcher.seed = seed  # shuffles and seeds the batches' streams
    self._read_status()  # the last epoch's reports
    self._sampled = 0
    self._epoch = self._epoch + 1 if epoch is None else epoch
    self._to_hand_out = self._batcher.batches(self._epoch, start)
    self._handed_out_all = False
    self._next_to_hand_out = self._next_position = self._epoch_start = start
    self._remaining = len(self._batcher) - start
    self._hand_out()
    return self._remaining

  def _hand_out(self) -> None:
    r"""Hands out batches while fewer than ``_window`` are in flight and fewer
    than twice that lie ahead of the one to yield (which bounds the batches
    that come before their turn), each to the process with the fewest in
    flight; after the last one, tells each process the epoch is handed out."""
    if self._handed_out_all:
      return
    shares: List[list] = [[] for _ in self._tasks]
    while (
      self._in_flight < self._window
      and self._next_to_hand_out - self._next_position < 2 * self.depth
    ):
      batch = next(self._to_hand_out, None)
      if batch is None:
        self._handed_out_all = True
        break
      worker = min(range(self.num_workers), key=self._per_worker.__getitem__)
      position, index = batch
      # numpy, pickled by value: a tensor in a pipe goes through a shared
      # memory file and the resource sharer's socket, milliseconds a batch
      shares[worker].append((position, index.numpy()))
      self._per_worker[worker] += 1
      self._worker_of[position] = worker
      self._next_to_hand_out += 1
    for tasks, share in zip(self._tasks, shares):
      if share:
        tasks.send((MpCommand.SAMPLE, (self._batcher.seed, self._epoch, share)))
      if self._handed_out_all:
        tasks.send((MpCommand.END_EPOCH, self._epoch))

  def next_message(self) -> Optional[SampleMessage]:
    if self._remaining == 0:
      return None
    try:
      msg = self._take_held(self._next_position)
      while msg is None:
        msg = self._receive()
        if batch_place(msg) != (self._epoch, self._next_position):
          self._hold(msg)
          msg = None
          self._hand_out()  # the workers go on while this batch waits
    except BaseException:
      self._failed = True  # the samplers cannot finish the epoch: shut down at once
      raise
    self._next_position += 1
    self._remaining -= 1
    self._hand_out()
    return msg

  def _receive(self) -> SampleMessage:
    r"""The channel's next message (of any position).

    Raises:
      SamplingError: a sampling process sent an error.
      TimeoutError: nothing came within the RPC timeout plus a margin.
    """
    wait_ms = batch_wait_ms(self.worker_options.rpc_timeout)
    try:
      msg = self.output_channel.recv(timeout_ms=wait_ms)
    except QueueTimeoutError as e:
      if isinstance(e, ChannelClosedError):
        raise
      raise QueueTimeoutError(self._stalled(wait_ms / 1000)) from e
    raise_if_error(msg)
    self._largest_batch = max(self._largest_batch, message_nbytes(msg))
    self._per_worker[self._worker_of.pop(batch_place(msg)[1])] -= 1
    return msg

  def _stalled(self, waited_s: float) -> str:
    r"""What a wait for the next batch that timed out says."""
    text = f'no batch came from the sampling processes within {waited_s:.0f} s'
    shm_size = getattr(self.output_channel, 'shm_size', None)
    if shm_size is not None and self._largest_batch:
      text += (
        f"; batches so far took up to {self._largest_batch / 2**20:.1f} MB of the channel's "
        f'{shm_size / 2**20:.1f} MB: a channel_size under about 3 batches (the one yielded, '
        'one that came early, the next) stalls the samplers; raise channel_size'
      )
    return text

  def _hold(self, msg: SampleMessage) -> None:
    r"""Keeps a batch that came before its turn. It stays in the channel's
    memory while the batches kept there take at most a third of it, which
    leaves the batch due next room to be written however the rest is
    fragmented (first-fit blocks of at most a batch each); beyond that it is
    copied out."""
    epoch, position = batch_place(msg)
    if epoch != self._epoch or position < self._next_position:
      raise RuntimeError(
        f'a sampling process sent batch {position} of epoch {epoch} while batch '
        f'{self._next_position} of epoch {self._epoch} was due'
      )
    size = message_nbytes(msg)
    if self._held_bytes + size <= self._hold_budget:
      self._held_bytes += size
      self._held_in_channel[position] = size
    else:
      msg = {key: value.clone() for key, value in msg.items()}
    self._arrived[position] = msg

  def _take_held(self, position: int) -> Optional[SampleMessage]:
    r"""The batch at ``position`` if it came before its turn, else None."""
    self._held_bytes -= self._held_in_channel.pop(position, 0)
    return self._arrived.pop(position, None)

  def _drop_unyielded(self) -> None:
    r"""Receives and drops the batches handed out and not yet yielded (the
    last epoch was left unfinished)."""
    self._arrived.clear()
    self._held_in_channel.clear()
    self._held_bytes = 0
    try:
      while self._in_flight > 0:
        self._receive()
    except BaseException:
      self._failed = True
      raise

  @property
  def epoch_sampled(self) -> bool:
    r"""Whether every sampling process has sampled all of its share of this
    epoch (its batches may still wait in the channel)."""
    self._read_status()
    return self._handed_out_all and self._sampled >= self.num_workers

  def _read_status(self) -> None:
    r"""Counts the sampling processes' end-of-epoch reports that arrived."""
    for status in self._status:
      try:
        while status.poll():
          kind, _, epoch = status.recv()
          if kind == 'sampled' and epoch == self._epoch:
            self._sampled += 1
      except (EOFError, OSError):  # a dead process: next_message reports it
        pass

  @property
  def remaining(self) -> int:
    r"""Batches of this epoch not yet yielded."""
    return self._remaining

  def _drop_until_stopped(self, deadline: float) -> None:
    r"""Receives and drops what the sampling processes still send until they
    have all exited (or ``deadline``): a process whose batches wait for room
    in a full channel could not stop otherwise."""
    while any(proc.is_alive() for proc in self._procs) and time.monotonic() < deadline:
      try:
        self.output_channel.recv(timeout_ms=STOP_POLL_MS)
      except ChannelClosedError:  # every process exited and nothing is left
        return
      except QueueTimeoutError:  # nothing came: check on the processes again
        pass

  def shutdown(self, graceful: Optional[bool] = None, timeout: Optional[float] = None) -> None:
    r"""Stops the sampling processes (idempotent).

    Args:
      graceful: leave the samplers' RPC world together with the other
        trainers' samplers, which may still need this partition (waits until
        every trainer's loader is shut down); False leaves at once. Default:
        graceful unless a batch failed.
      timeout: the longest wait for all of them together (default: the RPC
        timeout plus 10 s when graceful, else 2 s: after a failure a sampler
        may be stuck in a request to a dead peer); then they are killed.
    """
    if graceful is None:
      graceful = not self._failed
    if timeout is None:
      timeout = self.worker_options.rpc_timeout + 10 if graceful else NON_GRACEFUL_STOP_S
    for tasks in self._tasks:
      try:
        tasks.send((MpCommand.STOP, graceful))
      except (ValueError, OSError):  # the process is already gone
        pass
    deadline = time.monotonic() + timeout
    self._drop_until_stopped(deadline)
    for proc in self._procs:
      proc.join(max(0.0, deadline - time.monotonic()))
      if proc.is_alive():
        logger.warning('sampling process %s did not stop; killing it', proc.name)
        proc.kill()
        proc.join()
    for conn in self._tasks + self._status:
      conn.close()
    self._procs, self._tasks, self._status = [], [], []
