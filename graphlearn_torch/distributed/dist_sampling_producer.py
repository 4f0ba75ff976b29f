"""Sampling producers: where a distributed loader's batches are sampled.

``DistMpSamplingProducer`` spawns sampling processes that form an RPC world
of their own and send finished batches into the trainer's ShmChannel; each
epoch, the trainer hands every process its share of the seed batches.
"""

import logging
import multiprocessing
import os
import queue
import traceback
from enum import Enum
from typing import List, Optional

import torch

from ..channel import ChannelBase, SampleMessage
from ..loader.base import SeedBatcher
from ..sampler.base import NodeSamplerInput, SamplingConfig
from .dist_context import get_context, init_worker_group
from .dist_dataset import DistDataset
from .dist_options import MpDistSamplingWorkerOptions
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


def _sampling_worker_loop(
  rank: int,
  world_size: int,
  data: DistDataset,
  sampler_input: NodeSamplerInput,
  config: SamplingConfig,
  options: MpDistSamplingWorkerOptions,
  channel: ChannelBase,
  tasks: multiprocessing.Queue,
  status: multiprocessing.Queue,
  parent_pid: int,
) -> None:
  from .dist_neighbor_sampler import DistNeighborSampler

  torch.set_num_threads(1)
  sampler = None
  graceful = True  # peers may still need this partition: leave together
  try:
    init_worker_group(world_size, rank, SAMPLING_GROUP)
    init_rpc(
      options.master_addr, options.master_port, options.num_rpc_threads or 4, options.rpc_timeout
    )
    seed = None if config.seed is None else config.seed + rank
    sampler = DistNeighborSampler(
      data,
      config.num_neighbors,
      with_edge=config.with_edge,
      with_weight=config.with_weight,
      edge_dir=config.edge_dir,
      collect_features=config.collect_features,
      channel=channel,
      concurrency=options.worker_concurrency,
      seed=seed,
    )
    status.put(('ready', rank, None))

    def report(error: BaseException) -> None:
      text = ''.join(traceback.format_exception(type(error), error, error.__traceback__))
      channel.send(error_message(f'sampling process {rank} (pid {os.getpid()}):\n{text}'))

    while True:
      try:
        command, batches = tasks.get(timeout=PARENT_CHECK_S)
      except queue.Empty:
        if os.getppid() != parent_pid:
          logger.error('sampling process %d: its trainer exited; stopping', rank)
          graceful = False
          return
        continue
      if command == MpCommand.STOP:
        return
      for index in batches:
        coro = _tagged(sampler._sample_from_nodes(sampler_input[index]), index)
        sampler.add_task(coro, callback=channel.send, on_error=report)
      sampler.wait_all()
  except Exception:
    graceful = False
    text = traceback.format_exc()
    status.put(('error', rank, text))
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
    sampler_input: NodeSamplerInput,
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
    self._batcher = SeedBatcher(
      len(sampler_input),
      sampling_config.batch_size,
      sampling_config.shuffle,
      sampling_config.drop_last,
      sampling_config.seed,
    )
    self._procs: List[multiprocessing.Process] = []
    self._tasks: List[multiprocessing.Queue] = []
    self._status: Optional[multiprocessing.Queue] = None

  def init(self) -> None:
    r"""Starts the sampling processes and waits until all are ready (they
    meet the other trainers' sampling processes first)."""
    ctx = get_context()
    ctx_mp = multiprocessing.get_context('spawn')
    self._status = ctx_mp.Queue()
    world_size = ctx.world_size * self.num_workers
    for i in range(self.num_workers):
      tasks = ctx_mp.Queue()
      proc = ctx_mp.Process(
        target=_sampling_worker_loop,
        args=(
          ctx.rank * self.num_workers + i,
          world_size,
          self.data,
          self.sampler_input,
          self.sampling_config,
          self.worker_options,
          self.output_channel,
          tasks,
          self._status,
          os.getpid(),
        ),
        daemon=True,
        name=f'glt-sampler-{ctx.rank}-{i}',
      )
      proc.start()
      self._tasks.append(tasks)
      self._procs.append(proc)
    try:
      for _ in range(self.num_workers):
        kind, rank, text = self._status.get(timeout=self.worker_options.rpc_timeout)
        if kind == 'error':
          raise RuntimeError(f'sampling process {rank} failed to start:\n{text}')
    except queue.Empty:
      self.shutdown()
      raise TimeoutError(
        f'the sampling processes were not ready within {self.worker_options.rpc_timeout} s '
        '(did every trainer create its loader? they meet at '
        f'{self.worker_options.master_addr}:{self.worker_options.master_port})'
      ) from None
    except BaseException:
      self.shutdown()
      raise

  def __len__(self) -> int:
    return len(self._batcher)

  def produce_all(self) -> int:
    r"""Starts an epoch: hands out this epoch's batches (reshuffled); returns
    how many batches will arrive."""
    batches = list(self._batcher)
    for i, tasks in enumerate(self._tasks):
      tasks.put((MpCommand.SAMPLE_ALL, batches[i :: self.num_workers]))
    return len(batches)

  def shutdown(self, timeout: Optional[float] = None) -> None:
    r"""Stops the sampling processes (idempotent). They leave their RPC
    world together, so this waits until every trainer's loader is shut down
    too, at most ``timeout`` seconds (default: the RPC timeout plus 10 s),
    then kills them."""
    if timeout is None:
      timeout = self.worker_options.rpc_timeout + 10
    for tasks in self._tasks:
      try:
        tasks.put((MpCommand.STOP, None))
      except (ValueError, OSError):  # the queue is already closed
        pass
    for proc in self._procs:
      proc.join(timeout)
      if proc.is_alive():
        logger.warning('sampling process %s did not stop; killing it', proc.name)
        proc.kill()
        proc.join()
    self._procs, self._tasks = [], []
