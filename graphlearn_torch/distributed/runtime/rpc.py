"""RPC between the processes of a job, on torch.distributed.rpc (TensorPipe).

Every process of the job joins one RPC world under the name
``{group_name}_{rank}``. On top of it: collectives that need no process group
(``all_gather``, ``barrier``), a registry of callees that peers invoke by id
(``rpc_register``, ``rpc_request_async``; views sent alone: ``payload``), and
the router that says which worker holds a data partition."""

import atexit
import logging
import threading
import warnings
from abc import ABC, abstractmethod
from typing import Any, Dict, List, Optional, Union

import torch
from torch.distributed import rpc

from ...utils.host_share import boot_id
from ...utils.network import advertised_address, default_socket_ifname
from ...utils.threads import cap_for_shared_host
from .context import DistRole, get_context, worker_name
from .payload import sent_alone
from .rendezvous import leave_rendezvous, rendezvous_url
from .rpc_args import (  # noqa: F401  (DEFAULT_RPC_TRANSPORTS, TRANSPORTS_ENV: once here)
  DEFAULT_RPC_TRANSPORTS,
  TRANSPORTS_ENV,
  checked_port,
  checked_threads,
  checked_timeout,
  rpc_channels,
  rpc_transports,
)

logger = logging.getLogger(__name__)

DEFAULT_RPC_TIMEOUT_S = 180


class RpcCalleeBase(ABC):
  r"""Something peers can call by id once it is registered with
  :func:`rpc_register`: a sampler, a feature table."""

  @abstractmethod
  def call(self, *args, **kwargs) -> Any:
    r"""Runs the request of a peer (in one of this process's RPC threads)."""


class _RpcState:
  r"""This process's RPC state: the world it joined and its callees."""

  def __init__(self, name: str, master_addr: str, master_port: int, timeout: float):
    self.name = name  # this process's RPC name
    self.master_addr = master_addr
    self.master_port = master_port
    self.timeout = timeout
    self.lock = threading.Lock()
    self.callees: List[RpcCalleeBase] = []
    self.gather_round = 0
    self.global_gather_round = 0
    self.gathers: Dict[Any, _Gather] = {}
    self.worker_names: Dict[DistRole, List[str]] = {}
    self.addresses: Dict[str, str] = {}  # worker name -> the address it advertised
    self.service: Optional[object] = None


class _Gather:
  def __init__(self, world_size: int):
    self.values: Dict[int, Any] = {}
    self.world_size = world_size
    self.future = torch.futures.Future()


_state: Optional[_RpcState] = None


def _require_state() -> _RpcState:
  if _state is None:
    raise RuntimeError('RPC is not initialized: call init_rpc (or init_server / init_client) first')
  return _state


def rpc_is_initialized() -> bool:
  r"""Whether this process has joined an RPC world."""
  return _state is not None


def process_has_rpc_agent() -> bool:
  r"""Whether this process runs an RPC agent of torch's: ours
  (``init_rpc``), or one a script started with
  ``torch.distributed.rpc.init_rpc``."""
  if _state is not None:
    return True
  try:
    rpc.get_worker_info()  # raises without an agent
  except RuntimeError:
    return False
  return True


def get_rpc_master_addr() -> str:
  return _require_state().master_addr


def get_rpc_master_port() -> int:
  return _require_state().master_port


def get_rpc_current_group_worker_names() -> List[str]:
  r"""The RPC names of this process's group, by rank."""
  ctx = get_context()
  return [worker_name(ctx.group_name, r) for r in range(ctx.world_size)]


def get_rpc_worker_names() -> Dict[DistRole, List[str]]:
  r"""The RPC names of every group of the job, by role, each by rank."""
  return dict(_require_state().worker_names)


def init_rpc(
  master_addr: str,
  master_port: int,
  num_rpc_threads: int = 16,
  rpc_timeout: float = DEFAULT_RPC_TIMEOUT_S,
  is_dynamic: bool = False,
) -> None:
  r"""Joins the job's RPC world as the process that ``get_context()`` names.

  Args:
    master_addr: the address of the job's rendezvous (global rank 0).
    master_port: its port.
    num_rpc_threads: threads that serve peers' requests.
    rpc_timeout: seconds an RPC (and the start-up rendezvous) may take.
    is_dynamic: unsupported (GLT's dynamic worlds); must be False.
  """
  global _state
  if is_dynamic:
    raise ValueError('dynamic RPC worlds (is_dynamic=True) are not supported')
  master_port = checked_port(master_port)
  num_rpc_threads = checked_threads(num_rpc_threads) or 16
  rpc_timeout = checked_timeout(rpc_timeout)
  ctx = get_context()
  if ctx is None:
    raise RuntimeError('join a group first: init_worker_group (or init_server / init_client)')
  if _state is not None:
    logger.warning('RPC is already initialized in this process; init_rpc ignored')
    return
  # TensorPipe and the gloo group the RPC agent makes advertise the
  # hostname's address unless told an interface: where that is a loopback
  # address, peers on other machines cannot connect.
  default_socket_ifname(master_addr)
  options = rpc.TensorPipeRpcBackendOptions(
    num_worker_threads=num_rpc_threads,
    rpc_timeout=rpc_timeout,
    # A rendezvous bounded by rpc_timeout that names missing peers (torch's
    # own tcp:// one waits 30 minutes whatever the timeout).
    init_method=rendezvous_url(master_addr, master_port, rpc_timeout, ctx.worker_name()),
    _transports=rpc_transports(),
    _channels=rpc_channels(),
  )
  logger.info('%s joins the RPC world at %s:%s', ctx.worker_name(), master_addr, master_port)
  # The state exists before the agent starts: a peer's first request (the
  # gather below) may arrive as soon as it does.
  _state = _RpcState(ctx.worker_name(), master_addr, master_port, rpc_timeout)
  try:
    with warnings.catch_warnings():
      # torch's own RPC start-up hands its private gloo group to
      # all_gather_object, which warns of a deprecated use of a Backend as a
      # ProcessGroup in every process; the use is torch's, not ours.
      warnings.filterwarnings(
        'ignore', message='You are using a Backend .* as a ProcessGroup', category=UserWarning
      )
      rpc.init_rpc(
        ctx.worker_name(),
        rank=ctx.global_rank,
        world_size=ctx.global_world_size,
        rpc_backend_options=options,
      )
  except BaseException:
    _state = None
    leave_rendezvous(ctx.worker_name(), graceful=False)
    raise
  # Leave at exit if the caller did not: torch's RPC threads killed at
  # interpreter exit abort the process.
  atexit.register(_shutdown_at_exit)
  address = advertised_address()
  host = boot_id() or address
  roles = global_all_gather((ctx.role, ctx.group_name, ctx.rank, address, host))
  names: Dict[DistRole, Dict[int, str]] = {}
  for role, group, rank, peer_address, _ in roles:
    names.setdefault(role, {})[rank] = worker_name(group, rank)
    _state.addresses[worker_name(group, rank)] = peer_address
  _state.worker_names = {role: [d[r] for r in sorted(d)] for role, d in names.items()}
  # The job's processes on this host share its cores (and inducer maps).
  ctx.processes_on_host = sum(peer_host == host for *_, peer_host in roles)
  cap_for_shared_host(ctx.processes_on_host)


def shutdown_rpc(graceful: bool = True, timeout: Optional[float] = None) -> None:
  r"""Leaves the RPC world.

  Args:
    graceful: wait until every peer has finished its outstanding work (and
      left too); else drop at once.
    timeout: seconds a graceful shutdown waits for the peers (default: the
      RPC timeout).

  Raises:
    RuntimeError: a graceful shutdown found a peer gone (it then leaves at
      once: the peers' wait for each other would last the whole timeout),
      or the peers did not all leave within the timeout.
  """
  global _state
  if _state is None:
    return
  atexit.unregister(_shutdown_at_exit)
  wait = _state.timeout if timeout is None else timeout
  name, left_gracefully = _state.name, False
  try:
    gone = _peers_gone(wait) if graceful else []
    if graceful and not gone:
      rpc.shutdown(graceful=True, timeout=wait)
      left_gracefully = True
    else:
      rpc.shutdown(graceful=False)
  finally:
    _state = None
    leave_rendezvous(name, left_gracefully)
  if gone:
    raise RuntimeError(
      f'{name} left the RPC world without waiting for its peers: {", ".join(gone)} '
      'did not answer (gone)'
    )


def _answer_present() -> bool:
  return True


def _peers_gone(timeout: float) -> List[str]:
  r"""The peers that do not answer a request within ``timeout`` seconds (a
  process that has exited fails it at once, where a graceful shutdown's wait
  for its word would last the whole timeout)."""
  me = _require_state().name
  peers = [n for names in _state.worker_names.values() for n in names if n != me]
  asked, gone = [], []
  for peer in peers:
    try:
      asked.append((peer, rpc.rpc_async(peer, _answer_present, timeout=timeout)))
    except RuntimeError:
      gone.append(peer)
  for peer, answer in asked:
    try:
      answer.wait()
    except RuntimeError:
      gone.append(peer)
  return sorted(gone)


def _shutdown_at_exit() -> None:
  if _state is not None:
    logger.warning(
      'leaving the RPC world at exit: call shutdown_rpc() (or shutdown_client()) first'
    )
    shutdown_rpc(graceful=False)


# -- collectives -------------------------------------------------------------


@rpc.functions.async_execution
def _gather_at_leader(key, rank: int, world_size: int, obj: Any) -> torch.futures.Future:
  state = _require_state()
  with state.lock:
    gather = state.gathers.get(key)
    if gather is None:
      gather = state.gathers[key] = _Gather(world_size)
    gather.values[rank] = obj
    done = len(gather.values) == gather.world_size
    if done:
      del state.gathers[key]
  if done:
    gather.future.set_result([gather.values[r] for r in range(world_size)])
  return gather.future


def _all_gather(
  leader: Union[str, int], key, rank: int, world_size: int, obj: Any, timeout
) -> List[Any]:
  state = _require_state()
  wait = state.timeout if timeout is None else timeout
  return rpc.rpc_sync(leader, _gather_at_leader, args=(key, rank, world_size, obj), timeout=wait)


def all_gather(obj: Any, timeout: Optional[float] = None) -> List[Any]:
  r"""Every rank's ``obj`` in this process's group, by rank. Every rank of
  the group must call it, in the same order as the other collectives.

  Args:
    obj: something picklable.
    timeout: seconds to wait for the others (default: the RPC timeout).
  """
  state = _require_state()
  ctx = get_context()
  with state.lock:
    state.gather_round += 1
    key = ('group', ctx.group_name, state.gather_round)
  leader = worker_name(ctx.group_name, 0)
  return _all_gather(leader, key, ctx.rank, ctx.world_size, obj, timeout)


def barrier(timeout: Optional[float] = None) -> None:
  r"""Waits until every rank of this process's group gets here."""
  all_gather(None, timeout)


def global_all_gather(obj: Any, timeout: Optional[float] = None) -> List[Any]:
  r"""Every process's ``obj`` in the whole job, by global rank."""
  state = _require_state()
  ctx = get_context()
  with state.lock:
    state.global_gather_round += 1
    key = ('global', state.global_gather_round)
  # Global rank 0 is the RPC world's worker of id 0.
  return _all_gather(0, key, ctx.global_rank, ctx.global_world_size, obj, timeout)


def global_barrier(timeout: Optional[float] = None) -> None:
  r"""Waits until every process of the job gets here."""
  global_all_gather(None, timeout)


# -- callees -----------------------------------------------------------------


def rpc_register(callee: RpcCalleeBase) -> int:
  r"""Registers ``callee`` and returns its id. Processes that serve each
  other must register the same callees in the same order, so ids agree."""
  if not isinstance(callee, RpcCalleeBase):
    raise TypeError(f'callee must be an RpcCalleeBase, got {type(callee).__name__}')
  state = _require_state()
  with state.lock:
    state.callees.append(callee)
    return len(state.callees) - 1


def _invoke_callee(callee_id: int, *args, **kwargs) -> Any:
  state = _require_state()
  if not 0 <= callee_id < len(state.callees):
    raise RuntimeError(
      f'{get_context().worker_name()} has no callee {callee_id} '
      f'({len(state.callees)} registered): peers registered callees in different orders'
    )
  return sent_alone(state.callees[callee_id].call(*args, **kwargs))


def rpc_request_async(
  worker_name: str, callee_id: int, args=None, kwargs=None, timeout: Optional[float] = None
) -> torch.futures.Future:
  r"""Calls callee ``callee_id`` on ``worker_name``; returns a future of the result.

  Args:
    worker_name: the peer's RPC name.
    callee_id: the id ``rpc_register`` gave the callee.
    args: positional arguments of ``callee.call``.
    kwargs: keyword arguments.
    timeout: seconds before the future fails (default: the RPC timeout).
  """
  state = _require_state()
  future = rpc.rpc_async(
    worker_name,
    _invoke_callee,
    args=(callee_id, *sent_alone(tuple(args or ()))),
    kwargs=sent_alone(kwargs or {}),
    timeout=state.timeout if timeout is None else timeout,
  )
  return _naming_the_peer(future, worker_name)


def rpc_request(worker_name: str, callee_id: int, args=None, kwargs=None, timeout=None) -> Any:
  r"""Calls callee ``callee_id`` on ``worker_name`` and waits for the result."""
  return rpc_request_async(worker_name, callee_id, args, kwargs, timeout).wait()


def rpc_global_request_async(
  target_role: DistRole, role_rank: int, func, args=None, kwargs=None, timeout=None
) -> torch.futures.Future:
  r"""Runs ``func(*args, **kwargs)`` on rank ``role_rank`` of the group of
  ``target_role``; returns a future of its result."""
  names = get_rpc_worker_names().get(target_role, [])
  if not 0 <= role_rank < len(names):
    raise ValueError(f'there is no {target_role.name} of rank {role_rank} ({len(names)} known)')
  state = _require_state()
  future = rpc.rpc_async(
    names[role_rank],
    func,
    args=args or (),
    kwargs=kwargs or {},
    timeout=state.timeout if timeout is None else timeout,
  )
  return _naming_the_peer(future, names[role_rank])


def _naming_the_peer(future: torch.futures.Future, peer: str) -> torch.futures.Future:
  r"""``future``, whose transport failure (a timeout, a lost connection)
  says which peer and host it was waiting for. The peer's own errors keep
  their type (torch names the peer in them)."""

  def result(done: torch.futures.Future):
    try:
      return done.value()
    except RuntimeError as e:
      if 'On WorkerInfo' in str(e):
        raise
      address = _state.addresses.get(peer, 'an unknown address') if _state else 'unknown'
      raise RuntimeError(
        f'the request to {peer} (at {address}) failed: {e} (the peer or its host is lost, '
        f'or it did not answer within the RPC timeout)'
      ) from e

  return future.then(result)


def rpc_global_request(target_role: DistRole, role_rank: int, func, args=None, kwargs=None):
  r"""``rpc_global_request_async(...).wait()``."""
  return rpc_global_request_async(target_role, role_rank, func, args, kwargs).wait()


def rpc_global_request_by_rank(global_rank: int, func, args=None, kwargs=None, timeout=None):
  r"""Runs ``func(*args, **kwargs)`` on the process of global rank
  ``global_rank`` and waits for its result."""
  ctx = get_context()
  if not 0 <= global_rank < ctx.global_world_size:
    raise ValueError(f'global rank {global_rank} is outside the job of {ctx.global_world_size}')
  state = _require_state()
  return rpc.rpc_sync(
    global_rank,
    func,
    args=args or (),
    kwargs=kwargs or {},
    timeout=state.timeout if timeout is None else timeout,
  )


# -- this process's service ----------------------------------------------------


def rpc_serve(service: object) -> None:
  r"""Makes ``service`` the object whose methods peers call by name on this
  process (``rpc_service_request_async``), until it leaves the RPC world: a
  server's DistServer, say."""
  _require_state().service = service


def rpc_local_service() -> Optional[object]:
  r"""The object this process serves (``rpc_serve``), or None."""
  return _state.service if _state is not None else None


# -- data partitions -----------------------------------------------------------


class RpcDataPartitionRouter:
  r"""Which worker to ask for data of a partition. Requests for a partition
  held by several workers go to them in turn.

  Args:
    partition2workers: for every partition, the RPC names of its holders.
  """

  def __init__(self, partition2workers: List[List[str]]):
    for idx, workers in enumerate(partition2workers):
      if not workers:
        raise ValueError(f'no worker holds data partition {idx}')
    self.partition2workers = partition2workers
    self._turn = [0] * len(partition2workers)
    self._lock = threading.Lock()

  def get_to_worker(self, data_partition_idx: int) -> str:
    workers = self.partition2workers[data_partition_idx]
    with self._lock:
      turn = self._turn[data_partition_idx]
      self._turn[data_partition_idx] = (turn + 1) % len(workers)
    return workers[turn]


def rpc_sync_data_partitions(num_data_partitions: int, current_partition_idx: int):
  r"""Tells the group which partition this process holds and learns the
  others'. Returns, per partition, the RPC names of its holders (by rank)."""
  ctx = get_context()
  if not 0 <= current_partition_idx < num_data_partitions:
    raise ValueError(f'partition {current_partition_idx} is outside [0, {num_data_partitions})')
  held = all_gather(current_partition_idx)
  partition2workers: List[List[str]] = [[] for _ in range(num_data_partitions)]
  for rank, idx in enumerate(held):
    partition2workers[idx].append(worker_name(ctx.group_name, rank))
  missing = [i for i, w in enumerate(partition2workers) if not w]
  if missing:
    raise RuntimeError(f'no process of group {ctx.group_name!r} holds partitions {missing}')
  return partition2workers
