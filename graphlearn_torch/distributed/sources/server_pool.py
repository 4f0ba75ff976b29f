"""A server's sampling processes (server-client mode with
``RemoteDistSamplingWorkerOptions(num_workers > 1)``).

Each server starts ``num_workers`` processes once, the first time a client's
loader asks for them, and they sample for every producer of the server. The
processes of every server form one sampling world, each holding its server's
partition: the processes of servers on one host map each other's
partitions in place (``HostPeers``), others reach them over RPC. They send
the batches into one channel of the server, whose receiving thread hands
each to its producer; the producer buffers it for its client's fetches.
"""

import logging
import threading
from typing import Callable, Dict, Optional, Tuple

import torch

from ...batch.codec import batch_place, encode_error, error_text, producer_tag
from ...channel import ChannelClosedError, QueueTimeoutError, SampleMessage, ShmChannel
from ..data.dataset import DistDataset
from .options import MpDistSamplingWorkerOptions
from .processes import SamplingProcesses
from .sampling_process import MpCommand, ProducerSpec

logger = logging.getLogger(__name__)

# Milliseconds between the receiving thread's checks on the processes.
CHECK_MS = 1000

Deliver = Callable[[SampleMessage], None]


class ServerSamplingPool:
  r"""A server's sampling processes, shared by its producers.

  Args:
    dataset: the server's partition.
    options: how many processes, how many batches each samples at once,
      where the servers' processes meet.
    server_rank: this server's rank.
    num_servers: servers in the job (each starts its processes).
  """

  def __init__(
    self,
    dataset: DistDataset,
    options: MpDistSamplingWorkerOptions,
    server_rank: int,
    num_servers: int,
  ):
    self.dataset = dataset
    self.options = options
    self.server_rank = server_rank
    self.num_servers = num_servers
    self.channel = ShmChannel(4 * options.channel_capacity, options.channel_size)
    self.processes = SamplingProcesses(options, self.channel)
    self._lock = threading.Lock()
    # (producer, epoch, position) -> (its process, where its message goes)
    self._pending: Dict[Tuple[int, int, int], Tuple[int, Deliver]] = {}
    self._per_worker = [0] * options.num_workers  # batches in flight, by process
    self._broken: Optional[str] = None  # why no batch can be sampled any more
    self._stopping = threading.Event()
    self._receiver = threading.Thread(target=self._receive, name='glt-pool-recv', daemon=True)

  @property
  def num_workers(self) -> int:
    return self.options.num_workers

  def start(self) -> None:
    r"""Starts the processes; returns when every server's have met."""
    n = self.num_workers
    self.processes.start(self.dataset, self.server_rank * n, self.num_servers * n, {})
    self._receiver.start()
    logger.info(
      'server %d: %d sampling processes ready (their world meets at %s:%s)',
      self.server_rank, n, self.options.master_addr, self.options.master_port,
    )  # fmt: skip

  def create(self, producer: int, spec: ProducerSpec) -> None:
    r"""Has every process sample for ``producer`` from now on."""
    self.processes.send_all(MpCommand.CREATE, (producer, spec))

  def destroy(self, producer: int) -> None:
    r"""Drops ``producer``: its batches in flight are dropped as they come."""
    with self._lock:
      for key in [k for k in self._pending if k[0] == producer]:
        worker, _ = self._pending.pop(key)
        self._per_worker[worker] -= 1
    if not self._stopping.is_set():
      self.processes.send_all(MpCommand.DESTROY, producer)

  def sample(
    self,
    producer: int,
    seed: int,
    epoch: int,
    position: int,
    index: torch.Tensor,
    deliver: Deliver,
  ) -> None:
    r"""Has the process with the fewest batches in flight sample batch
    ``position`` of ``epoch`` of ``producer`` (seeds ``index``, stream
    ``seed``); ``deliver`` gets its message, or an error message, in the
    receiving thread."""
    with self._lock:
      broken = self._broken
      if broken is None:
        worker = min(range(self.num_workers), key=self._per_worker.__getitem__)
        self._pending[(producer, epoch, position)] = (worker, deliver)
        self._per_worker[worker] += 1
    if broken is not None:
      deliver(encode_error(broken))
      return
    # numpy, pickled by value (a tensor would go through a shared memory file)
    share = [(position, index.numpy())]
    self.processes.send(worker, MpCommand.SAMPLE, (producer, seed, epoch, share))

  def _receive(self) -> None:
    r"""Hands each batch to its producer until the processes are gone."""
    while True:
      try:
        msg = self.channel.recv(timeout_ms=CHECK_MS)
      except ChannelClosedError:
        if not self._stopping.is_set():
          self._fail_all(f'server {self.server_rank}: its sampling processes exited')
        return
      except QueueTimeoutError:
        if self._stopping.is_set():
          return
        dead = self.processes.dead()
        if dead:
          codes = ', '.join(f'{p.name} (exit code {p.exitcode})' for p in dead)
          self._fail_all(f'server {self.server_rank}: sampling processes {codes} exited')
        continue
      self._hand_over(msg)

  def _hand_over(self, msg: SampleMessage) -> None:
    producer = producer_tag(msg)
    if producer is None:  # a process failed as a whole
      self._fail_all(f'server {self.server_rank}: {error_text(msg)}')
      return
    with self._lock:
      entry = self._pending.pop((producer, *batch_place(msg)), None)
      if entry is not None:
        self._per_worker[entry[0]] -= 1
    if entry is None or self._stopping.is_set():
      return  # its producer was destroyed
    if self.channel.stats()['free_bytes'] < self.channel.shm_size // 2:
      msg = {key: value.clone() for key, value in msg.items()}  # buffered long: free the channel
    entry[1](msg)

  def _fail_all(self, why: str) -> None:
    r"""Fails every batch in flight and every later one with ``why``."""
    with self._lock:
      if self._broken is None:
        self._broken = why
        logger.error('%s', why)
      failed, self._pending = list(self._pending.values()), {}
      self._per_worker = [0] * self.num_workers
    for _, deliver in failed:
      deliver(encode_error(why))

  def shutdown(self) -> None:
    r"""Stops the processes, leaving their world with the other servers'."""
    self._stopping.set()
    self.processes.shutdown(graceful=self._broken is None, drain=False)
    if self._receiver.is_alive():
      self._receiver.join(2 * CHECK_MS / 1000)
