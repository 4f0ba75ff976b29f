"""Multiprocess sampling: a loader's batches sampled in processes it starts.

The sampling processes form an RPC world of their own (every trainer's
processes together) and send finished batches into the trainer's
ShmChannel. The trainer hands the processes batches through pipes, a window
of them ahead of the one it yields next (as torch's DataLoader hands its
workers indices), and yields them in order: each batch draws from its own
random stream, so the batches are the same whoever samples them.
"""

import logging
import time
from typing import Callable, Dict, List, Optional, Union

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
from .base import BatchSource, batch_wait_ms
from .options import MpDistSamplingWorkerOptions
from .processes import SamplingProcesses
from .sampling_process import MpCommand, ProducerSpec

logger = logging.getLogger(__name__)

# While it keeps early batches in the channel, how often (ms) the trainer's
# wait for a batch checks whether a sampling process waits for room.
ROOM_CHECK_MS = 50


def entries_in_channel(msg: SampleMessage) -> SampleMessage:
  r"""The entries of a received message that hold the channel's bytes: a
  received CUDA tensor is the trainer's own copy (ShmChannel's GPU mirror)."""
  return {key: value for key, value in msg.items() if not value.is_cuda}


def copied_out_of_channel(msg: SampleMessage) -> SampleMessage:
  r"""``msg`` with the entries that hold the channel's bytes copied out."""
  return {**msg, **{key: value.clone() for key, value in entries_in_channel(msg).items()}}


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
    self._processes = SamplingProcesses(worker_options, output_channel)
    self._epoch = -1
    self._to_hand_out = iter(())  # (position, seed positions) not handed out yet
    self._handed_out_all = True
    self._next_to_hand_out = 0  # the position handed out next
    self._per_worker = [0] * self.num_workers  # handed out, not yet received, by process
    self._worker_of: Dict[int, int] = {}  # the process of each, by position
    self._arrived: Dict[int, SampleMessage] = {}  # came before their turn, by position
    self._arrived_bytes = 0  # theirs, in the channel, copied out or on a GPU
    self._held_in_channel: Dict[int, int] = {}  # those in the channel's memory: their bytes
    self._held_bytes = 0
    shm_size = getattr(output_channel, 'shm_size', None)  # a channel of bounded memory
    self._hold_budget = shm_size // 3 if shm_size is not None else float('inf')
    # the most bytes of early batches (anywhere) that more batches are handed out beside
    self._arrived_budget = shm_size if shm_size is not None else float('inf')
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
    self._processes.start(
      self.data,
      first_rank=ctx.rank * self.num_workers,
      world_size=ctx.world_size * self.num_workers,
      producers={None: ProducerSpec(self.sampler_input, self.sampling_config)},
      meanwhile=meanwhile,
    )

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
    r"""Hands out batches while fewer than ``_window`` are in flight, fewer
    than twice that lie ahead of the one to yield, and the batches that came
    before their turn take less than a channel's bytes (which bounds what
    they hold while the batch due is slow: the due batch is always in flight
    already), each to the process with the fewest in flight; after the last
    one, tells each process the epoch is handed out."""
    if self._handed_out_all:
      return
    shares: List[list] = [[] for _ in range(self.num_workers)]
    while (
      self._in_flight < self._window
      and self._next_to_hand_out - self._next_position < 2 * self.depth
      and self._arrived_bytes < self._arrived_budget
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
    for worker, share in enumerate(shares):
      if share:
        command = (None, self._batcher.seed, self._epoch, share)  # None: its only producer
        self._processes.send(worker, MpCommand.SAMPLE, command)
      if self._handed_out_all:
        self._processes.send(worker, MpCommand.END_EPOCH, self._epoch)

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
    deadline = time.monotonic() + wait_ms / 1000
    while True:
      left_ms = max(0.0, (deadline - time.monotonic()) * 1000)
      try:  # in slices while batches kept in the channel may be what the samplers wait for
        msg = self.output_channel.recv(
          timeout_ms=min(left_ms, ROOM_CHECK_MS) if self._held_in_channel else left_ms
        )
        break
      except QueueTimeoutError as e:
        if isinstance(e, ChannelClosedError):
          raise
        if time.monotonic() >= deadline:
          raise QueueTimeoutError(self._stalled(wait_ms / 1000)) from e
        if getattr(self.output_channel, 'waiting_for_room', 0):
          self._copy_held_out()
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
    memory while the batches kept there take at most a third of it; beyond
    that, and once a sampling process waits for room (``_receive``), it is
    copied out."""
    epoch, position = batch_place(msg)
    if epoch != self._epoch or position < self._next_position:
      raise RuntimeError(
        f'a sampling process sent batch {position} of epoch {epoch} while batch '
        f'{self._next_position} of epoch {self._epoch} was due'
      )
    size = message_nbytes(entries_in_channel(msg))
    self._arrived_bytes += message_nbytes(msg)  # a GPU's copies too
    if self._held_bytes + size <= self._hold_budget:
      self._held_bytes += size
      self._held_in_channel[position] = size
    else:
      msg = copied_out_of_channel(msg)
    self._arrived[position] = msg

  def _copy_held_out(self) -> None:
    r"""Copies the batches kept in the channel out of it: a sampling
    process waits for room while the trainer waits for a batch, so the
    free bytes, in pieces between those kept and the one the trainer still
    holds, may each be too small for the batch due next."""
    logger.debug(
      'a sampling process waits for room: %d early batches (%.1f MB) copied out of the channel',
      len(self._held_in_channel), self._held_bytes / 2**20,
    )  # fmt: skip
    for position in self._held_in_channel:
      self._arrived[position] = copied_out_of_channel(self._arrived[position])
    self._held_in_channel.clear()
    self._held_bytes = 0

  def _take_held(self, position: int) -> Optional[SampleMessage]:
    r"""The batch at ``position`` if it came before its turn, else None."""
    self._held_bytes -= self._held_in_channel.pop(position, 0)
    msg = self._arrived.pop(position, None)
    if msg is not None:
      self._arrived_bytes -= message_nbytes(msg)
    return msg

  def _drop_unyielded(self) -> None:
    r"""Receives and drops the batches handed out and not yet yielded (the
    last epoch was left unfinished)."""
    self._arrived.clear()
    self._arrived_bytes = 0
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
    for status in self._processes.status:
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

  def shutdown(self, graceful: Optional[bool] = None, timeout: Optional[float] = None) -> None:
    r"""Stops the sampling processes (idempotent).

    Args:
      graceful: leave the samplers' RPC world together with the other
        trainers' samplers, which may still need this partition (waits until
        every trainer's loader is shut down); False leaves at once. Default:
        graceful unless a batch failed.
      timeout: see ``SamplingProcesses.shutdown``.
    """
    self._processes.shutdown(not self._failed if graceful is None else graceful, timeout)
