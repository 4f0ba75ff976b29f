"""``spawn``: ``torch.multiprocessing.spawn`` without named semaphores, its
processes forked from a fork server.

torch's spawn gives every process an error queue, and a multiprocessing
queue holds a named semaphore in ``/dev/shm`` that only its creator (or its
resource tracker) removes: a job killed whole (SIGKILL to its session, as an
out-of-memory kill or a lost machine's scheduler does) leaves them behind.
Here each process reports its failure through a pipe, which holds nothing
outside the processes.

A spawned process imports torch, PyG and this library anew: about 250 MB of
its own a process, and seconds to start. Forked from a fork server that
imported them once, the processes share those pages (the server freezes
its objects before it forks, and each process what it inherits, so that the
garbage collector never writes to them) and start in milliseconds. On a
machine with a GPU the server imports torch and this library alone: a
process forked from one that started the CUDA driver cannot use CUDA, and
importing PyG (or a script) may start it."""

import gc
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from multiprocessing import connection as mp_connection
from multiprocessing import forkserver
from typing import Callable, Dict, List, Optional, Sequence

import torch

from .host_share import HostShareError, ProcessWatch

logger = logging.getLogger(__name__)


class SpawnedProcessError(RuntimeError):
  r"""A process that ``spawn`` started failed: raised an exception (its
  traceback is in the message) or died (its exit code is)."""


# What a fork server imports where a GPU is seen: modules that start no CUDA
# driver as they are imported. A process forked from one that started it
# cannot use CUDA (cudaErrorInitializationError), and some imports start it:
# PyG's did on an H200 host (torch 2.11, PyG 2.8), and so does a script that
# imports PyG or touches the GPU at import.
CUDA_SAFE_PACKAGES = ('torch', 'graphlearn_torch')


def fork_server_modules(preload: Sequence[str]) -> List[str]:
  r"""What of ``preload`` a fork server imports: all of it on a machine
  without a GPU; where torch sees one (``torch.cuda.device_count``, which
  asks NVML and starts no driver), only torch's and this library's modules
  (``CUDA_SAFE_PACKAGES``): the processes forked from it import the rest
  themselves, as spawned ones do.

  Args:
    preload: modules the caller would have the server import.
  """
  if torch.cuda.device_count() == 0:
    return list(preload)
  return [name for name in preload if name.split('.')[0] in CUDA_SAFE_PACKAGES]


def fork_server_context(preload: Sequence[str]) -> multiprocessing.context.BaseContext:
  r"""The 'forkserver' context, its server started now (it imports while the
  caller goes on) with ``preload`` imported (``fork_server_modules`` of it:
  torch's and this library's alone where a GPU is seen), then its objects
  frozen (``fork_server_preload``); 'spawn' where the platform has no fork
  server. The server's preload is set by whoever starts it first.

  Args:
    preload: modules the server imports ('__main__': the script, as a
      spawned process imports it).
  """
  if 'forkserver' not in multiprocessing.get_all_start_methods():
    return multiprocessing.get_context('spawn')
  ctx = multiprocessing.get_context('forkserver')
  modules = fork_server_modules(preload)
  ctx.set_forkserver_preload([*modules, f'{__package__}.fork_server_preload'])
  forkserver.ensure_running()
  return ctx


def adopt_environment(environment: Dict[str, str]) -> None:
  r"""Makes a forked process's environment its parent's (a fork server's
  children start in the server's, which may have started earlier; the
  working directory and ``sys.argv`` multiprocessing passes itself), and
  freezes the objects it inherited: a garbage collection would otherwise
  write to every page they lie on, and copy it.

  Args:
    environment: the parent's ``os.environ``.
  """
  gc.freeze()
  for key in set(os.environ) - set(environment):
    del os.environ[key]
  os.environ.update(environment)


def _run(fn: Callable, index: int, args: Sequence, errors, environment, launcher: int) -> None:
  try:
    adopt_environment(environment)
    _stop_with_the_launcher(launcher)
    fn(index, *args)
  except BaseException:  # every failure goes to the parent
    try:
      errors.send(traceback.format_exc())
    finally:
      sys.exit(1)
  finally:
    errors.close()


# Seconds the processes get to stop after Ctrl-C before they are killed: a
# terminal's interrupt reaches them too, and they leave as their scripts do.
INTERRUPT_GRACE_S = 10.0


def _stop_with_the_launcher(pid: int) -> None:
  r"""Interrupts this process (a KeyboardInterrupt in its main thread, as
  Ctrl-C does) once its launcher, process ``pid``, has exited, so that a
  launcher killed leaves no process training on alone; kills it if it has
  not stopped ``INTERRUPT_GRACE_S`` seconds later."""
  watch = ProcessWatch()
  try:
    watch.add(pid, 'the launcher')
  except HostShareError:  # gone already, or no pidfds on this platform: nothing to follow
    return

  def stop_when_it_exits() -> None:
    watch.wait()
    logger.error('the launcher (pid %d) exited: stopping process %d', pid, os.getpid())
    os.kill(os.getpid(), signal.SIGINT)
    threading.Event().wait(INTERRUPT_GRACE_S)  # the process exits meanwhile, this thread with it
    logger.error('process %d did not stop %g s after its launcher: killing it', os.getpid(),
                 INTERRUPT_GRACE_S)  # fmt: skip
    os.kill(os.getpid(), signal.SIGKILL)

  threading.Thread(target=stop_when_it_exits, name='glt-launcher-watch', daemon=True).start()


# What a trainer imports besides the script: PyG, whose Data its batches
# become (skipped where it is not installed).
TRAINER_PRELOAD = ('torch', 'graphlearn_torch', 'torch_geometric')


def trainer_process_context(module: str) -> multiprocessing.context.BaseContext:
  r"""Where ``spawn`` starts its processes: a fork server that imports the
  script, ``module`` (the one the processes run a function of), torch, PyG
  and this library (``fork_server_context``).

  Args:
    module: the module of the function the processes run.
  """
  return fork_server_context(['__main__', module, *TRAINER_PRELOAD])


def spawn(
  fn: Callable, args: Sequence = (), nprocs: int = 1, start_method: Optional[str] = None
) -> None:
  r"""Runs ``fn(i, *args)`` in ``nprocs`` new processes and waits for all; the
  first to fail has the others killed and is raised here.

  Args:
    fn: the function (importable: a module's top-level function).
    args: its arguments after the process index.
    nprocs: how many processes.
    start_method: 'forkserver' (the default where the platform has it):
      the processes are forked from a fork server that imported the
      script, ``fn``'s module, torch, PyG and this library once (torch and
      this library alone on a machine with a GPU: ``fork_server_modules``),
      and share those pages; they start in the caller's environment, working
      directory and ``sys.argv`` (what the modules read as they are
      imported, they read in the server's). 'spawn': each process a fresh
      interpreter.

  Raises:
    SpawnedProcessError: a process raised (with its traceback) or died.
    KeyboardInterrupt: Ctrl-C: the processes got ``INTERRUPT_GRACE_S``
      seconds to stop (a terminal interrupts them too), and the rest were
      killed.
  """
  if start_method not in (None, 'forkserver', 'spawn'):
    raise ValueError(f"start_method must be 'forkserver' or 'spawn', got {start_method!r}")
  if start_method == 'spawn':
    ctx = multiprocessing.get_context('spawn')
  else:
    ctx = trainer_process_context(fn.__module__)
  environment = dict(os.environ)
  procs, readers = [], []
  why = 'another one failed'  # why the processes still running are killed
  try:
    for index in range(nprocs):
      reader, writer = ctx.Pipe(duplex=False)
      proc = ctx.Process(
        target=_run,
        args=(fn, index, tuple(args), writer, environment, os.getpid()),
        name=f'spawned-{index}',
      )
      proc.start()
      writer.close()
      procs.append(proc)
      readers.append(reader)
    running = {proc.sentinel: index for index, proc in enumerate(procs)}
    reports = {reader: index for index, reader in enumerate(readers)}
    tracebacks = {}
    while running:
      for ready in mp_connection.wait(list(running) + list(reports)):
        if ready in reports:
          index = reports.pop(ready)
          try:
            tracebacks[index] = ready.recv()
          except EOFError:  # it exited without a report
            pass
          continue
        index = running.pop(ready)
        proc = procs[index]
        proc.join()
        if proc.exitcode != 0:
          for reader, i in list(reports.items()):  # its report, if still in the pipe
            if i == index and reader.poll():
              tracebacks[index] = reader.recv()
          cause = tracebacks.get(index) or f'it exited with code {proc.exitcode}'
          raise SpawnedProcessError(f'process {index} (pid {proc.pid}) failed:\n{cause}')
  except KeyboardInterrupt:
    why = 'it did not stop after the interrupt'
    _wait_after_interrupt(procs)
    raise
  finally:
    for proc in procs:
      if proc.is_alive():
        logger.warning('killing process %s (pid %d): %s', proc.name, proc.pid, why)
        proc.kill()
      proc.join()
    for reader in readers:
      reader.close()


def _wait_after_interrupt(procs: List[multiprocessing.process.BaseProcess]) -> None:
  r"""Gives the processes still running ``INTERRUPT_GRACE_S`` seconds, all
  together, to stop (a second Ctrl-C cuts the wait short)."""
  running = [proc for proc in procs if proc.is_alive()]
  if running:
    logger.warning(
      'interrupted: waiting up to %g s for %d process(es) to stop', INTERRUPT_GRACE_S, len(running)
    )
  deadline = time.monotonic() + INTERRUPT_GRACE_S
  for proc in running:
    proc.join(max(0.0, deadline - time.monotonic()))
