"""A sampling process (``processes.py``'s ``SamplingProcesses`` starts it,
for a trainer's loader in worker mode or for a server): it joins the
sampling processes' RPC world, takes the batches its owner hands it through
a pipe, samples them (``worker_concurrency`` at a time) and sends them into
its owner's channel, until the owner stops it or exits.

A process samples for one or more producers: a trainer's process for its
loader (created with it, its batches untagged), a server's for each of its
clients' loaders (created and destroyed by command, each batch tagged with
its producer)."""

import logging
import os
import pickle
import queue
import threading
import traceback
from dataclasses import dataclass
from enum import Enum
from multiprocessing.connection import Connection
from typing import Callable, Dict, List, Optional, Tuple, Union

import torch

from ..._ext import cuda_kernels_available
from ...batch.codec import (
  encode_error,
  place_batch,
  producer_tag,
  receipt_of,
  tag_producer,
)
from ...channel import (
  ChannelBase,
  ChannelClosedError,
  QueueTimeoutError,
  SampleMessage,
  ShmChannel,
)
from ...sampler.base import EdgeSamplerInput, NodeSamplerInput, SamplingConfig
from ...sampler.schema import RandomStream
from ...utils.host_share import HostShareError, ProcessWatch
from ...utils.log_setup import LogSetup
from ...utils.spawn import adopt_environment
from ..data.dataset import DistDataset
from ..runtime.context import init_worker_group
from ..runtime.event_loop import ConcurrentEventLoop
from ..runtime.rpc import init_rpc, shutdown_rpc
from ..sampling.partition_service import PartitionService
from .messages import MessageSampler
from .options import MpDistSamplingWorkerOptions

logger = logging.getLogger(__name__)

SAMPLING_GROUP = '_sampling_worker'
# How often an idle sampling process checks that its trainer still lives.
PARENT_CHECK_S = 1.0


def worker_device(options, rank: int) -> Optional[torch.device]:
  r"""The GPU a trainer's sampling process ``rank`` (0, 1, ... of that
  trainer) samples on: its entry of ``options.worker_devices`` (taken in
  turn); None without them, or without a GPU and the CUDA kernels (it then
  samples on the CPU, as logged)."""
  devices = options.worker_devices
  if not devices:
    return None
  device = torch.device(devices[rank % len(devices)])
  if device.type != 'cuda':
    return None
  if not cuda_kernels_available():
    logger.info('sampling process %d: no GPU with the CUDA kernels; sampling on the CPU', rank)
    return None
  return torch.device('cuda', device.index if device.index is not None else 0)


class MpCommand(Enum):
  SAMPLE = 0  # (producer, seed, epoch, [(position, seed positions), ...]): sample these
  END_EPOCH = 1  # (epoch): every batch of it was handed out: report when sampled
  STOP = 2  # (graceful): leave
  CREATE = 3  # (producer, ProducerSpec): sample for this producer from now on
  DESTROY = 4  # (producer): drop it; its batches not yet begun are not sampled


@dataclass
class ProducerSpec:
  r"""What a sampling process samples for one producer.

  Args:
    sampler_input: the producer's seeds.
    config: what to sample and how.
    stream_keys: the keys after ``(epoch, position)`` of each batch's random
      stream (``RandomStream.for_batch``).
    input_offset: added to the input ids its batches carry.
    channel: the loader's own channel, on this host: a batch goes straight
      there when it has room, and a ``receipt_of`` it to the owner, which
      gets the batch itself otherwise (so a loader that is not read never
      holds up the others').
  """

  sampler_input: Union[NodeSamplerInput, EdgeSamplerInput]
  config: SamplingConfig
  stream_keys: Tuple[int, ...] = ()
  input_offset: int = 0
  channel: Optional[ChannelBase] = None


def _placed(msg: SampleMessage, place: tuple) -> SampleMessage:
  r"""``msg`` marked with its ``place``: epoch, position and producer."""
  epoch, position, producer = place
  msg = place_batch(msg, epoch, position)
  return msg if producer is None else tag_producer(msg, producer)


def _read_commands(
  tasks: Connection, commands: queue.SimpleQueue, stopping: threading.Event
) -> None:
  r"""Moves the trainer's commands from its pipe to ``commands`` as they
  come, then None once the trainer's end is closed. A sampling process whose
  tasks wait for room in a full channel still empties the pipe, so the
  trainer's hand-out never waits on it while the trainer is the one that
  would empty the channel. A STOP sets ``stopping`` as it comes, so that the
  batches handed out before it are not sampled."""
  try:
    while True:
      command = tasks.recv()
      if command[0] == MpCommand.STOP:
        stopping.set()
      commands.put(command)
  except (EOFError, OSError):
    commands.put(None)


class _SampledBatches:
  r"""What a sampling process does with the batches its owner hands it:
  samples them on its event loop and sends each into the owner's channel; a
  batch that fails goes there as an error, which the owner raises. Once the
  owner's end of the channel is closed, it stops.

  Args:
    rank: this process's rank in the sampling world.
    service: its partition service.
    loop: the event loop batches run on.
    channel: the owner's channel.
  """

  def __init__(self, rank: int, service: PartitionService, loop: ConcurrentEventLoop, channel):
    self.rank = rank
    self.service = service
    self.loop = loop
    self.channel = channel
    self.producers: Dict[Optional[int], Tuple[MessageSampler, ProducerSpec]] = {}
    self.trainer_gone = threading.Event()
    self.stopping = threading.Event()  # the owner said STOP: sample nothing more

  def create(self, producer: Optional[int], spec: ProducerSpec) -> None:
    r"""Samples for ``producer`` (None: the only one, its batches untagged)."""
    seed = None if spec.config.seed is None else spec.config.seed + self.rank
    messages = MessageSampler.from_config(
      self.service.data,
      spec.config,
      seed,
      service=self.service,
      into_shm_channel=isinstance(self.channel, ShmChannel),
      on_device=isinstance(self.channel, ShmChannel),  # it copies GPU tensors out itself
    )
    self.producers[producer] = (messages, spec)

  def send(self, msg: SampleMessage) -> None:
    try:
      self.channel.send(msg)
    except ChannelClosedError:
      self.trainer_gone.set()

  def report(self, error: BaseException, place: Optional[tuple] = None) -> None:
    r"""Sends ``error`` as a batch's message (``place``: its epoch, position
    and producer) or as the process's."""
    if self.trainer_gone.is_set():
      return
    text = ''.join(traceback.format_exception(type(error), error, error.__traceback__))
    msg = encode_error(f'sampling process {self.rank} (pid {os.getpid()}):\n{text}')
    self.send(msg if place is None else _placed(msg, place))

  def deliver(self, msg: SampleMessage, place: tuple) -> None:
    r"""Sends a sampled batch, marked with its ``place`` (epoch, position
    and producer)."""
    try:
      msg = _placed(msg, place)
      if self._sent_to_loader(msg):
        msg = receipt_of(msg)
      self.send(msg)
    except Exception as error:  # writing its deferred rows failed: the owner gets why
      self.report(error, place)

  def _sent_to_loader(self, msg: SampleMessage) -> bool:
    r"""Sends a batch straight to its loader's channel, where its producer
    has one with room now; whether it did."""
    producer = producer_tag(msg)
    _, spec = self.producers.get(producer, (None, None))
    if producer is None or spec is None or spec.channel is None:
      return False
    try:
      spec.channel.send(msg, timeout_ms=0)
      return True
    except (QueueTimeoutError, ValueError, MemoryError):  # no room: it goes through the owner
      return False
    except ChannelClosedError:  # the loader is gone: its owner drops the producer
      self.producers.pop(producer, None)
      return False

  def sample(self, producer: Optional[int], seed: int, epoch: int, batches) -> None:
    r"""Starts sampling ``batches`` (``(position, seed positions)`` of
    ``epoch``) of ``producer``, each from its own random stream."""
    if producer not in self.producers:
      return  # destroyed meanwhile
    messages, spec = self.producers[producer]
    for position, index in batches:
      if self.trainer_gone.is_set() or self.stopping.is_set():
        return
      index = torch.from_numpy(index)
      random = RandomStream.for_batch(seed, epoch, position, *spec.stream_keys)
      inputs = spec.sampler_input[index]
      coro = messages.message(spec.config.sampling_type, inputs, index + spec.input_offset, random)
      place = (epoch, position, producer)
      self.loop.add_task(
        coro,
        callback=lambda msg, place=place: self.deliver(msg, place),
        on_error=lambda error, place=place: self.report(error, place),
      )


def watch_trainer(pid: int) -> Callable[[], bool]:
  r"""A check of whether the trainer process ``pid`` has exited. A sampling
  process that a fork server started is not its trainer's child, so its
  parent's pid says nothing; a pidfd does (``kill(pid, 0)`` where the
  platform has none).

  Args:
    pid: the trainer's process id.
  """
  watch = ProcessWatch()
  try:
    watch.add(pid, 'the trainer')
    return lambda: watch.exited() is not None
  except HostShareError:  # gone already, or no pidfds here
    return lambda: not _process_exists(pid)


def _process_exists(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # exists, another user's
    pass
  return True


def _next_command(commands: queue.SimpleQueue, trainer_exited: Callable[[], bool]):
  r"""The trainer's next command; None once the trainer is gone (its pipe
  closed, or the process exited without closing it)."""
  while True:
    try:
      return commands.get(timeout=PARENT_CHECK_S)
    except queue.Empty:
      if trainer_exited():
        return None


def _serve(
  batches: _SampledBatches,
  tasks: Connection,
  status: Connection,
  trainer_exited: Callable[[], bool],
) -> bool:
  r"""Follows the owner's commands until it says stop or is gone; returns
  whether to leave the RPC world gracefully."""
  commands: queue.SimpleQueue = queue.SimpleQueue()
  reader = threading.Thread(
    target=_read_commands,
    args=(tasks, commands, batches.stopping),
    name='glt-commands',
    daemon=True,
  )
  reader.start()
  while True:
    received = _next_command(commands, trainer_exited)
    if received is None:
      logger.error('sampling process %d: its owner exited; stopping', batches.rank)
      return False
    command, payload = received
    if command == MpCommand.STOP:
      return bool(payload)  # STOP carries whether to wait for the peers
    if command == MpCommand.SAMPLE:
      batches.sample(*payload)
    elif command == MpCommand.CREATE:
      batches.create(*payload)
    elif command == MpCommand.DESTROY:
      batches.producers.pop(payload, None)
    else:  # END_EPOCH
      batches.loop.wait_all()
      status.send(('sampled', batches.rank, payload))
    if batches.trainer_gone.is_set():
      logger.error('sampling process %d: its owner exited; stopping', batches.rank)
      return False


def _join_sampling_world(
  rank: int, world_size: int, data_payload: bytes, options: MpDistSamplingWorkerOptions
) -> PartitionService:
  r"""Loads the partition, joins the sampling processes' RPC world (on
  this process's GPU, if it has one) and builds its partition service
  (collective)."""
  # Unpickled here rather than by the spawn bootstrap, so that a partition
  # that fails to load is reported to the owner with its cause.
  data: DistDataset = pickle.loads(data_payload)
  device = worker_device(options, rank % options.num_workers)
  if device is not None:
    torch.cuda.set_device(device)
    data.set_device(device.index)
  init_worker_group(world_size, rank, SAMPLING_GROUP)
  init_rpc(
    options.master_addr, options.master_port, options.num_rpc_threads or 4, options.rpc_timeout
  )
  return PartitionService(data)


def run_sampling_process(
  rank: int,
  world_size: int,
  data_payload: bytes,
  producers: Dict[Optional[int], ProducerSpec],
  options: MpDistSamplingWorkerOptions,
  channel: ChannelBase,
  tasks: Connection,
  status: Connection,
  parent_pid: int,
  environment: Dict[str, str],
  log_setup: LogSetup,
  trainer_ends: List[Connection],
) -> None:
  r"""A sampling process: samples the batches its owner (a trainer or a
  server) hands it, for ``producers`` and those created later, into the
  owner's channel; reports start-up, the end of each epoch's sampling and
  start-up failures on ``status``. It runs in ``environment``, its owner's
  (a fork server's children start in the server's), and logs as its owner
  does (``log_setup``). A process forked from its owner closes
  ``trainer_ends``, the owner's ends of the pipes it inherited, so that its
  pipe reports the owner's end closed."""
  for end in trainer_ends:
    end.close()
  adopt_environment(environment)
  log_setup.apply()
  trainer_exited = watch_trainer(parent_pid)
  torch.set_num_threads(1)
  loop = None
  graceful = True  # peers may still need this partition: leave together
  try:
    service = _join_sampling_world(rank, world_size, data_payload, options)
    if options.pin_memory and isinstance(channel, ShmChannel) and not channel.shares_cuda_tensors:
      if worker_device(options, rank % options.num_workers) is not None:
        channel.pin_memory()  # batches copy from the GPU straight into it
    loop = ConcurrentEventLoop(options.worker_concurrency)
    batches = _SampledBatches(rank, service, loop, channel)
    for producer, spec in producers.items():
      batches.create(producer, spec)
    status.send(('ready', rank, None))
    graceful = _serve(batches, tasks, status, trainer_exited)
  except KeyboardInterrupt:  # Ctrl-C reached this process too: its owner stops the job
    graceful = False
  except Exception:
    graceful = False
    text = traceback.format_exc()
    try:
      status.send(('error', rank, text))
    except OSError:  # the trainer is gone
      pass
    try:
      channel.send(encode_error(f'sampling process {rank} (pid {os.getpid()}):\n{text}'), 1000)
    except Exception:  # the trainer is gone or the channel full: status has it
      pass
  finally:
    if loop is not None:
      loop.shutdown_loop()
    try:
      shutdown_rpc(graceful=graceful, timeout=options.rpc_timeout)
    except Exception as e:  # a peer died: there is no one left to leave with
      logger.warning('sampling process %d left its RPC world without its peers: %s', rank, e)
