"""The RPC world's rendezvous, bounded by the caller's timeout.

``torch.distributed.rpc`` meets its peers through a ``tcp://`` rendezvous
whose store waits up to 30 minutes, whatever ``rpc_timeout`` says, and then
cannot say who is missing. The ``glt://`` rendezvous registered here is the
same TCP store, created with the caller's timeout: every process records its
rank, name and world size in it, and a process that waits too long says which
ranks never arrived, or that its rank was taken twice, or that the processes
disagree on the world size.

It also keeps jobs apart. Rank 0 records its job (``job_identity``) in the
store, and marks the rendezvous complete once every rank arrived. A process
that finds the rendezvous of another job (a different ``GLT_JOB_ID``), or
one that is complete (a running job: a second run of the same script, say),
is refused with an error naming both jobs, before it writes anything there:
the running job goes on undisturbed.

Rank 0 serves the store for as long as the world lasts: torch's graceful
shutdown reads it to the end, so a rank 0 that left first would cut the
others' last reads (a C++ "Connection reset by peer" in their logs). Each
process that leaves the world says so in the store (``leave_rendezvous``),
and rank 0 waits for the others to have said so before it goes.
"""

import logging
import os
import socket
import sys
import time
from datetime import timedelta
from typing import Dict, Iterator, List, Optional, Tuple
from urllib.parse import quote, unquote, urlparse

from torch.distributed import (
  DistNetworkError,
  DistStoreError,
  Store,
  TCPStore,
  register_rendezvous_handler,
)

from ...utils.common import ephemeral_ports

logger = logging.getLogger(__name__)

SCHEME = 'glt'
_PREFIX = 'glt_rendezvous'
_JOB_KEY = f'{_PREFIX}/job'
_COMPLETE_KEY = f'{_PREFIX}/complete'
_LEFT_KEY = f'{_PREFIX}/left'
_ALL_LEFT_KEY = f'{_PREFIX}/all_left'
JOB_ID_VARIABLES = ('GLT_JOB_ID', 'TORCHELASTIC_RUN_ID')
r"""Where a process finds its job's identity: ``GLT_JOB_ID`` (``launch.py``
sets it; users may), else torchrun's ``TORCHELASTIC_RUN_ID``."""

# Seconds rank 0 waits for the others to leave after a graceful shutdown
# (they have passed its last barrier: they leave at once unless they died).
LEAVE_WAIT_S = 5.0

# This process's rendezvous (store, rank, world size) by its RPC name, from
# the rendezvous until it leaves the world.
_joined: Dict[str, Tuple[Store, int, int]] = {}


def job_identity() -> Tuple[Optional[str], str]:
  r"""``(job id, description)`` of this process's job: the id given in
  ``JOB_ID_VARIABLES`` (None when none is), and what errors call the job:
  the id, or where this process runs (script, pid, host)."""
  for variable in JOB_ID_VARIABLES:
    job_id = os.environ.get(variable)
    if job_id:
      return job_id, f"job '{job_id}'"
  script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else 'python'
  return None, f'the job of {script} (pid {os.getpid()} on {socket.gethostname()})'


def rendezvous_url(master_addr: str, master_port: int, timeout: float, name: str) -> str:
  r"""The ``init_method`` of a bounded rendezvous.

  Args:
    master_addr: the address of global rank 0, which serves the store.
    master_port: its port.
    timeout: seconds to wait for every peer.
    name: this process's RPC name (errors name the missing peers' ranks).
  """
  return f'{SCHEME}://{master_addr}:{int(master_port)}?timeout={float(timeout)}&name={quote(name)}'


def _query(url) -> Dict[str, str]:
  return dict(pair.split('=', 1) for pair in url.query.split('&') if pair)


# A client's TCPStore retries a refused connection for its whole timeout,
# then sleeps a random delay of up to about 1.4 timeouts and tries once more:
# up to about 3 timeouts in all, and each failed try logs a C++ stack trace.
# So a client first waits until something listens at the address (a plain
# connection, refused at once while nothing does), then connects in short
# attempts, which keep the wait near the caller's timeout.
_ATTEMPT_S = 1.0
_PROBE_BACKOFF_S = 0.05


def _wait_until_listening(host: str, port: int, deadline: float) -> bool:
  r"""Whether a connection to ``host:port`` was accepted before the
  deadline."""
  while True:
    left = deadline - time.monotonic()
    try:
      with socket.create_connection((host, port), timeout=max(min(_ATTEMPT_S, left), 0.1)):
        return True
    except OSError:
      if left <= _PROBE_BACKOFF_S:
        return False
      time.sleep(_PROBE_BACKOFF_S)  # a refused connection's retry backoff


def _store(host: str, port: int, rank: int, world_size: int, timeout: float) -> TCPStore:
  return TCPStore(
    host,
    port,
    world_size,
    is_master=rank == 0,
    timeout=timedelta(seconds=timeout),
    wait_for_workers=False,
    multi_tenant=True,
  )


def _connect(host: str, port: int, rank: int, world_size: int, timeout: float) -> TCPStore:
  deadline = time.monotonic() + timeout
  try:
    if rank == 0:
      return _store(host, port, rank, world_size, timeout)
    while True:
      if not _wait_until_listening(host, port, deadline):
        raise _no_rank_0(host, port, rank, world_size, timeout)
      attempt = min(_ATTEMPT_S, max(deadline - time.monotonic(), 0.1))
      try:
        store = _store(host, port, rank, world_size, attempt)
      except (DistStoreError, RuntimeError):
        if time.monotonic() + 0.1 >= deadline:
          raise
        continue
      store.set_timeout(timedelta(seconds=timeout))
      return store
  except (DistStoreError, RuntimeError) as e:
    if rank == 0:
      ephemeral = ephemeral_ports()
      hint = (
        f'; it lies in the ephemeral range {ephemeral.start}-{ephemeral.stop - 1}, where any '
        f'outgoing connection (RPC makes many) can take it: pick one below {ephemeral.start} '
        f'(glt.utils.get_free_port does)'
        if port in ephemeral
        else ''
      )
      raise RuntimeError(
        f'rank 0 cannot serve the rendezvous at {host}:{port} ({e}); is the port taken by '
        f'another job? Give another master_port{hint}'
      ) from e
    raise _no_rank_0(host, port, rank, world_size, timeout) from e


def _no_rank_0(host: str, port: int, rank: int, world_size: int, timeout: float) -> TimeoutError:
  return TimeoutError(
    f'rank {rank} of {world_size} found no rendezvous at {host}:{port} within {timeout:g} s: '
    f'rank 0 did not start there (a wrong master address or port, or rank 0 failed)'
  )


def _check_job(store: Store, host: str, port: int, rank: int, deadline: float) -> None:
  r"""Refuses to join another job's rendezvous (see the module's doc): a
  different job id, or a rendezvous that is complete."""
  job_id, description = job_identity()
  if rank == 0:
    store.set(_JOB_KEY, f'{job_id or ""}\n{description}')
    return
  try:
    store.wait([_JOB_KEY], timedelta(seconds=max(deadline - time.monotonic(), 0.1)))
    theirs_id, theirs = store.get(_JOB_KEY).decode().split('\n', 1)
    complete = store.check([_COMPLETE_KEY])
  except (DistStoreError, DistNetworkError):
    return  # rank 0 is not there (yet): registering says so
  if complete:
    raise RuntimeError(
      f'{description} (rank {rank}) cannot join the rendezvous at {host}:{port}: it belongs to '
      f'{theirs}, which is running (every rank of it arrived). Give this job another master '
      'port, or stop the other job first'
    )
  if job_id and theirs_id and job_id != theirs_id:
    raise RuntimeError(
      f'{description} (rank {rank}) cannot join the rendezvous at {host}:{port}: it belongs to '
      f'{theirs}. Give this job another master port, or stop the other job first'
    )


def _missing(store: Store, world_size: int) -> List[int]:
  return [r for r in range(world_size) if not store.check([f'{_PREFIX}/name/{r}'])]


def _bounded_rendezvous(url: str, **kwargs) -> Iterator[Tuple[Store, int, int]]:
  parsed = urlparse(url)
  query = _query(parsed)
  rank, world_size = int(query['rank']), int(query['world_size'])
  timeout, name = float(query['timeout']), unquote(query.get('name', ''))
  host, port = parsed.hostname, parsed.port
  deadline = time.monotonic() + timeout
  store = _connect(host, port, rank, world_size, timeout)
  _check_job(store, host, port, rank, deadline)
  try:
    joined = store.add(f'{_PREFIX}/rank/{rank}', 1)
    if joined == 1:
      store.set(f'{_PREFIX}/world/{rank}', str(world_size))
      store.set(f'{_PREFIX}/name/{rank}', name)
  except DistNetworkError:
    raise RuntimeError(
      f'{name}: rank 0 closed the rendezvous at {host}:{port} while rank {rank} registered '
      f'(its job had started without this process, or failed)'
    ) from None
  if joined > 1:
    raise RuntimeError(
      f'{name}: rank {rank} joined the rendezvous at {host}:{port} twice: two processes were '
      f'given the same rank'
    )
  keys = [f'{_PREFIX}/name/{r}' for r in range(world_size)]
  try:
    store.wait(keys, timedelta(seconds=max(deadline - time.monotonic(), 0.1)))
  except DistNetworkError:
    raise RuntimeError(
      f'{name}: rank 0 closed the rendezvous at {host}:{port} before all {world_size} ranks '
      f'arrived: it failed (see its error: a world size or rank mismatch, say)'
    ) from None
  except DistStoreError:
    try:
      missing = _missing(store, world_size)
    except DistNetworkError:  # rank 0 timed out too, and closed the store first
      raise TimeoutError(
        f'{name}: the rendezvous at {host}:{port} timed out after {timeout:g} s, and rank 0 '
        f'closed the rendezvous before it could say which ranks never arrived'
      ) from None
    raise TimeoutError(
      f'{name}: the rendezvous at {host}:{port} timed out after {timeout:g} s: rank(s) '
      f'{missing} of {world_size} never arrived (not started, failed at start-up, a wrong '
      f'master port, or a different world size)'
    ) from None
  sizes = {r: int(store.get(f'{_PREFIX}/world/{r}')) for r in range(world_size)}
  if any(size != world_size for size in sizes.values()):
    raise RuntimeError(
      f'{name}: the processes at {host}:{port} disagree on the world size: {sizes} (rank: size)'
    )
  if rank == 0:
    store.set(_COMPLETE_KEY, '1')
  _joined[name] = (store, rank, world_size)
  yield store, rank, world_size
  raise RuntimeError('the glt:// rendezvous cannot be repeated')


def leave_rendezvous(name: str, graceful: bool) -> None:
  r"""Says in the store that this process (RPC name ``name``) left its
  world. After a graceful shutdown, rank 0 then waits (up to
  ``LEAVE_WAIT_S``) until every other rank has said so, keeping the store
  they read to the end. A process that did not meet its world here
  returns at once.

  Args:
    name: this process's RPC name.
    graceful: whether the world shut down gracefully (every rank passed
      its last barrier); else nobody waits.
  """
  joined = _joined.pop(name, None)
  if joined is None or not graceful:
    return
  store, rank, world_size = joined
  try:
    if rank != 0:
      if store.add(_LEFT_KEY, 1) == world_size - 1:
        store.set(_ALL_LEFT_KEY, '1')
    elif world_size > 1:
      store.wait([_ALL_LEFT_KEY], timedelta(seconds=LEAVE_WAIT_S))
  except (DistStoreError, DistNetworkError) as e:
    # The world is over either way: a peer or rank 0 died after its last barrier.
    logger.warning(
      '%s (rank %d of %d): not every rank said it left the RPC world: %s',
      name, rank, world_size, e,
    )  # fmt: skip


register_rendezvous_handler(SCHEME, _bounded_rendezvous)
