"""A sampling process of multiprocess sampling (``multiprocess.py``'s
``DistMpSamplingProducer`` starts it): it joins the sampling processes' RPC
world, takes the batches its trainer hands it through a pipe, samples them
(``worker_concurrency`` at a time) and sends them into the trainer's
channel, until the trainer stops it or exits."""

import logging
import os
import pickle
import queue
import threading
import traceback
from enum import Enum
from multiprocessing.connection import Connection
from typing import Callable, Dict, List, Optional, Union

import torch

from ..._ext import cuda_kernels_available
from ...batch.codec import encode_error, place_batch
from ...channel import ChannelBase, ChannelClosedError, SampleMessage, ShmChannel
from ...sampler.base import EdgeSamplerInput, NodeSamplerInput, SamplingConfig
from ...sampler.schema import RandomStream
from ...utils.host_share import HostShareError, ProcessWatch
from ..data.dataset import DistDataset
from ..runtime.context import init_worker_group
from ..runtime.event_loop import ConcurrentEventLoop
from ..runtime.rpc import init_rpc, shutdown_rpc
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
  SAMPLE = 0  # (seed, epoch, [(position, seed positions), ...]): sample these batches
  END_EPOCH = 1  # (epoch): every batch of it was handed out: report when sampled
  STOP = 2  # (graceful): leave


async def _placed(coro, epoch: int, position: int) -> SampleMessage:
  return place_batch(await coro, epoch, position)


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
  r"""What a sampling process does with the batches its trainer hands it:
  samples them on its event loop and sends each into the trainer's
  channel; a batch that fails goes there as an error, which the trainer
  raises. Once the trainer's end of the channel is closed, it stops."""

  def __init__(self, rank: int, messages: MessageSampler, loop: ConcurrentEventLoop, channel):
    self.rank = rank
    self.messages = messages
    self.loop = loop
    self.channel = channel
    self.trainer_gone = threading.Event()
    self.stopping = threading.Event()  # the trainer said STOP: sample nothing more

  def send(self, msg: SampleMessage) -> None:
    try:
      self.channel.send(msg)
    except ChannelClosedError:
      self.trainer_gone.set()

  def report(self, error: BaseException) -> None:
    if self.trainer_gone.is_set():
      return
    text = ''.join(traceback.format_exception(type(error), error, error.__traceback__))
    self.send(encode_error(f'sampling process {self.rank} (pid {os.getpid()}):\n{text}'))

  def deliver(self, msg: SampleMessage) -> None:
    try:
      self.send(msg)
    except Exception as error:  # writing its deferred rows failed: the trainer gets why
      self.report(error)

  def sample(self, sampling_type, sampler_input, seed: int, epoch: int, batches) -> None:
    r"""Starts sampling ``batches`` (``(position, seed positions)`` of
    ``epoch``), each from its own random stream."""
    for position, index in batches:
      if self.trainer_gone.is_set() or self.stopping.is_set():
        return
      index = torch.from_numpy(index)
      random = RandomStream.for_batch(seed, epoch, position)
      coro = self.messages.message(sampling_type, sampler_input[index], index, random)
      self.loop.add_task(
        _placed(coro, epoch, position), callback=self.deliver, on_error=self.report
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
  sampler_input,
  config: SamplingConfig,
  tasks: Connection,
  status: Connection,
  trainer_exited: Callable[[], bool],
) -> bool:
  r"""Follows the trainer's commands until it says stop or is gone;
  returns whether to leave the RPC world gracefully."""
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
      logger.error('sampling process %d: its trainer exited; stopping', batches.rank)
      return False
    command, payload = received
    if command == MpCommand.STOP:
      return bool(payload)  # STOP carries whether to wait for the peers
    if command == MpCommand.SAMPLE:
      batches.sample(config.sampling_type, sampler_input, *payload)
    else:  # END_EPOCH
      batches.loop.wait_all()
      status.send(('sampled', batches.rank, payload))
    if batches.trainer_gone.is_set():
      logger.error('sampling process %d: its trainer exited; stopping', batches.rank)
      return False


def _join_sampling_world(
  rank: int,
  world_size: int,
  data_payload: bytes,
  config: SamplingConfig,
  options: MpDistSamplingWorkerOptions,
  channel: ChannelBase,
) -> MessageSampler:
  r"""Loads the partition, joins the sampling processes' RPC world (on
  this process's GPU, if it has one) and builds its sampler (collective)."""
  # Unpickled here rather than by the spawn bootstrap, so that a partition
  # that fails to load is reported to the trainer with its cause.
  data: DistDataset = pickle.loads(data_payload)
  device = worker_device(options, rank % options.num_workers)
  if device is not None:
    torch.cuda.set_device(device)
    data.set_device(device.index)
  init_worker_group(world_size, rank, SAMPLING_GROUP)
  init_rpc(
    options.master_addr, options.master_port, options.num_rpc_threads or 4, options.rpc_timeout
  )
  seed = None if config.seed is None else config.seed + rank
  return MessageSampler.from_config(
    data, config, seed, defer_feature_rows=isinstance(channel, ShmChannel)
  )


def run_sampling_process(
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
  environment: Dict[str, str],
  trainer_ends: List[Connection],
) -> None:
  r"""A sampling process: samples the batches its trainer hands it, epoch by
  epoch, into the trainer's channel; reports start-up, the end of each
  epoch's sampling and start-up failures on ``status``. It runs in
  ``environment``, its trainer's (a fork server's children start in the
  server's). A process forked from its trainer closes ``trainer_ends``,
  the trainer's ends of the pipes it inherited, so that its pipe reports
  the trainer's end closed."""
  for end in trainer_ends:
    end.close()
  os.environ.clear()
  os.environ.update(environment)
  trainer_exited = watch_trainer(parent_pid)
  torch.set_num_threads(1)
  loop = None
  graceful = True  # peers may still need this partition: leave together
  try:
    messages = _join_sampling_world(rank, world_size, data_payload, config, options, channel)
    loop = ConcurrentEventLoop(options.worker_concurrency)
    status.send(('ready', rank, None))
    batches = _SampledBatches(rank, messages, loop, channel)
    graceful = _serve(batches, sampler_input, config, tasks, status, trainer_exited)
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
    shutdown_rpc(graceful=graceful, timeout=options.rpc_timeout)
