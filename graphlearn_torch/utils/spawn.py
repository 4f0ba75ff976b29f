"""``spawn``: ``torch.multiprocessing.spawn`` without named semaphores.

torch's spawn gives every process an error queue, and a multiprocessing
queue holds a named semaphore in ``/dev/shm`` that only its creator (or its
resource tracker) removes: a job killed whole (SIGKILL to its session, as an
out-of-memory kill or a lost machine's scheduler does) leaves them behind.
Here each process reports its failure through a pipe, which holds nothing
outside the processes."""

import logging
import multiprocessing
import sys
import traceback
from multiprocessing import connection as mp_connection
from typing import Callable, Sequence

logger = logging.getLogger(__name__)


class SpawnedProcessError(RuntimeError):
  r"""A process that ``spawn`` started failed: raised an exception (its
  traceback is in the message) or died (its exit code is)."""


def _run(fn: Callable, index: int, args: Sequence, errors) -> None:
  try:
    fn(index, *args)
  except BaseException:  # every failure goes to the parent
    try:
      errors.send(traceback.format_exc())
    finally:
      sys.exit(1)
  finally:
    errors.close()


def spawn(fn: Callable, args: Sequence = (), nprocs: int = 1) -> None:
  r"""Runs ``fn(i, *args)`` in ``nprocs`` new processes (the 'spawn' start
  method) and waits for all; the first to fail has the others killed and
  is raised here.

  Args:
    fn: the function (importable: a module's top-level function).
    args: its arguments after the process index.
    nprocs: how many processes.

  Raises:
    SpawnedProcessError: a process raised (with its traceback) or died.
  """
  ctx = multiprocessing.get_context('spawn')
  procs, readers = [], []
  try:
    for index in range(nprocs):
      reader, writer = ctx.Pipe(duplex=False)
      proc = ctx.Process(
        target=_run, args=(fn, index, tuple(args), writer), name=f'spawned-{index}'
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
  finally:
    for proc in procs:
      if proc.is_alive():
        logger.warning('killing process %s (pid %d): another one failed', proc.name, proc.pid)
        proc.kill()
      proc.join()
    for reader in readers:
      reader.close()
