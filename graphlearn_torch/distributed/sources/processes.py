"""A group of sampling processes: started by their owner (a trainer's loader
in worker mode, or a server in server-client mode), fed batches through
pipes, stopped by it.

The processes of every owner of a job form one RPC world (``master_addr``,
``master_port`` of the options), each holding its owner's partition, and
send what they sample into their owner's channel.
"""

import logging
import multiprocessing
import os
import time
from multiprocessing import connection as mp_connection
from multiprocessing.connection import Connection
from typing import Callable, Dict, List, Optional

import torch

from ...channel import ChannelBase, ChannelClosedError, QueueTimeoutError
from ...utils.log_setup import LogSetup
from ...utils.process_payload import pickled_for_process
from ...utils.spawn import fork_server_context
from ..data.dataset import DistDataset
from ..runtime.rpc import process_has_rpc_agent
from .options import MpDistSamplingWorkerOptions
from .sampling_process import MpCommand, ProducerSpec, run_sampling_process, worker_device

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
  r"""Whether this process's sampling processes can be forked from it: they
  sample on the CPU, the machine has no GPU, and this process has not
  joined an RPC world (a forked process would carry its agent). On a
  machine with a GPU, a process that has only asked how many GPUs there
  are has started the CUDA driver, which a forked process cannot start
  again, and TensorPipe's agent starts it. A forked process starts in
  milliseconds with everything its owner imported, as torch's DataLoader
  workers do.

  Args:
    on_gpu: whether the sampling processes sample on a GPU.
  """
  if on_gpu or 'fork' not in multiprocessing.get_all_start_methods():
    return False
  return not (torch.cuda.is_available() or process_has_rpc_agent())


def sampling_process_context(on_gpu: bool) -> multiprocessing.context.BaseContext:
  r"""Where sampling processes start: forked from their owner where that is
  safe (``can_fork_sampling_processes``); else from a fork server (one per
  owner, started here, with its first processes) that imports torch, this
  library and the script once, so that each process starts in milliseconds,
  where a spawned one imports them anew (seconds each, which the processes
  of a host pay together); spawned where there is no fork server.

  Args:
    on_gpu: whether the sampling processes sample on a GPU.
  """
  if can_fork_sampling_processes(on_gpu):
    return multiprocessing.get_context('fork')
  # '__main__' as the default has it: the script is imported once, too
  return fork_server_context(['__main__', run_sampling_process.__module__])


class SamplingProcesses:
  r"""``options.num_workers`` sampling processes of one owner.

  Args:
    options: how many, on which devices, where they meet, their timeouts.
    channel: where they send batches.
  """

  def __init__(self, options: MpDistSamplingWorkerOptions, channel: ChannelBase):
    self.options = options
    self.channel = channel
    # Pipes, not queues: they hold no named semaphores that a killed process
    # would leave behind in /dev/shm.
    self.procs: List[multiprocessing.Process] = []
    self.tasks: List[Connection] = []
    self.status: List[Connection] = []

  def __len__(self) -> int:
    return self.options.num_workers

  def start(
    self,
    data: DistDataset,
    first_rank: int,
    world_size: int,
    producers: Dict[Optional[int], ProducerSpec],
    meanwhile: Optional[Callable[[], None]] = None,
  ) -> None:
    r"""Starts the processes, runs ``meanwhile`` and waits until all are
    ready (they meet the other owners' sampling processes first); on a
    failure, stops them and raises.

    Args:
      data: the owner's partition (the processes map its shared tables).
      first_rank: the first process's rank in the sampling world.
      world_size: the sampling world's size.
      producers: what they sample for from the start.
      meanwhile: the owner's own start-up work.
    """
    devices = self.options.worker_devices or []
    ctx_mp = sampling_process_context(any(torch.device(d).type == 'cuda' for d in devices))
    gpus = {worker_device(self.options, i) for i in range(self.options.num_workers)}
    if len(gpus) == 1 and None not in gpus:
      # placed once here, read by every process on that GPU (CUDA IPC)
      data.place_on_gpu(gpus.pop().index)
    forked = ctx_mp.get_start_method() == 'fork'
    for i in range(self.options.num_workers):
      task_reader, task_writer = ctx_mp.Pipe(duplex=False)
      status_reader, status_writer = ctx_mp.Pipe(duplex=False)
      # one payload per process: shared descriptors go once
      with pickled_for_process(data, ctx_mp.get_start_method()) as payload:
        proc = ctx_mp.Process(
          target=run_sampling_process,
          args=(
            first_rank + i,
            world_size,
            payload,
            producers,
            self.options,
            self.channel,
            task_reader,
            status_writer,
            os.getpid(),
            dict(os.environ),
            LogSetup.of_this_process(),
            # a forked process closes its owner's ends of the pipes it inherited
            [*self.tasks, task_writer, *self.status, status_reader] if forked else [],
          ),
          daemon=True,
          name=f'glt-sampler-{first_rank + i}',
        )
        proc.start()
      task_reader.close()
      status_writer.close()
      self.tasks.append(task_writer)
      self.status.append(status_reader)
      self.procs.append(proc)
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
    timeout = self.options.rpc_timeout + STARTUP_S
    deadline = time.monotonic() + timeout
    waiting = dict(zip(self.status, self.procs))
    while waiting:
      ready = mp_connection.wait(list(waiting), max(0.0, deadline - time.monotonic()))
      if not ready:
        names = ', '.join(p.name for p in waiting.values())
        raise TimeoutError(
          f'the sampling processes {names} were not ready within {timeout} s: they wait for the '
          f"other owners' sampling processes at {self.options.master_addr}:"
          f'{self.options.master_port} (did every trainer create its loader?)'
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

  def send(self, worker: int, command: MpCommand, payload) -> None:
    r"""Sends process ``worker`` a command."""
    self.tasks[worker].send((command, payload))

  def send_all(self, command: MpCommand, payload) -> None:
    r"""Sends every process a command."""
    for tasks in self.tasks:
      tasks.send((command, payload))

  def dead(self) -> List[multiprocessing.Process]:
    r"""The processes that have exited."""
    return [proc for proc in self.procs if not proc.is_alive()]

  def _drop_until_stopped(self, deadline: float) -> None:
    r"""Receives and drops what the sampling processes still send until they
    have all exited (or ``deadline``): a process whose batches wait for room
    in a full channel could not stop otherwise."""
    while any(proc.is_alive() for proc in self.procs) and time.monotonic() < deadline:
      try:
        self.channel.recv(timeout_ms=STOP_POLL_MS)
      except ChannelClosedError:  # every process exited and nothing is left
        return
      except QueueTimeoutError:  # nothing came: check on the processes again
        pass

  def shutdown(self, graceful: bool, timeout: Optional[float] = None, drain: bool = True) -> None:
    r"""Stops the processes (idempotent).

    Args:
      graceful: leave the sampling world together with the other owners'
        processes, which may still need this partition; False leaves at once.
      timeout: the longest wait for all of them together (default: the RPC
        timeout plus 10 s when graceful, else 2 s: after a failure a process
        may be stuck in a request to a dead peer); then they are killed.
      drain: receive and drop what they still send meanwhile (False where
        another thread receives from the channel).
    """
    if timeout is None:
      timeout = self.options.rpc_timeout + 10 if graceful else NON_GRACEFUL_STOP_S
    for tasks in self.tasks:
      try:
        tasks.send((MpCommand.STOP, graceful))
      except (ValueError, OSError):  # the process is already gone
        pass
    deadline = time.monotonic() + timeout
    if drain:
      self._drop_until_stopped(deadline)
    for proc in self.procs:
      proc.join(max(0.0, deadline - time.monotonic()))
      if proc.is_alive():
        logger.warning('sampling process %s did not stop; killing it', proc.name)
        proc.kill()
        proc.join()
    for conn in self.tasks + self.status:
      conn.close()
    self.procs, self.tasks, self.status = [], [], []
