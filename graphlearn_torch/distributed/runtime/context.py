"""Who this process is in a distributed job: its role, group and ranks.

The one piece of global state graphlearn_torch keeps: set once per process by
``init_worker_group`` (worker mode) or by ``init_server`` / ``init_client``.
"""

from enum import Enum
from typing import Dict, List, Optional


class DistRole(Enum):
  r"""The role of a process: a worker (worker mode: trains and samples), a
  server (holds a partition and samples for clients) or a client (trains on
  batches that servers sample)."""

  WORKER = 1
  SERVER = 2
  CLIENT = 3


class DistContext:
  r"""The distributed identity of this process.

  Args:
    role: its role.
    group_name: the name of its group (processes of one role in one job).
    world_size: processes in its group.
    rank: its rank in its group.
    global_world_size: processes in the whole job (servers and clients).
    global_rank: its rank in the whole job.

  Attributes:
    processes_on_host: the processes of its RPC world on this host, itself
      among them (set by ``init_rpc``; 1 before).
  """

  def __init__(
    self,
    role: DistRole,
    group_name: str,
    world_size: int,
    rank: int,
    global_world_size: int,
    global_rank: int,
  ):
    if not 0 <= rank < world_size:
      raise ValueError(f'rank {rank} is outside the group of {world_size}')
    if not 0 <= global_rank < global_world_size:
      raise ValueError(f'global rank {global_rank} is outside the job of {global_world_size}')
    self.role = role
    self.group_name = group_name
    self.world_size = world_size
    self.rank = rank
    self.global_world_size = global_world_size
    self.global_rank = global_rank
    self.processes_on_host = 1

  def __repr__(self) -> str:
    return (
      f'DistContext(role={self.role.name}, group={self.group_name!r}, '
      f'rank={self.rank}/{self.world_size}, global_rank={self.global_rank}/'
      f'{self.global_world_size})'
    )

  def is_worker(self) -> bool:
    return self.role == DistRole.WORKER

  def is_server(self) -> bool:
    return self.role == DistRole.SERVER

  def is_client(self) -> bool:
    return self.role == DistRole.CLIENT

  def num_servers(self) -> int:
    if self.is_server():
      return self.world_size
    if self.is_client():
      return self.global_world_size - self.world_size
    return 0

  def num_clients(self) -> int:
    if self.is_client():
      return self.world_size
    if self.is_server():
      return self.global_world_size - self.world_size
    return 0

  def worker_name(self) -> str:
    r"""This process's name in the RPC world: ``{group_name}_{rank}``."""
    return worker_name(self.group_name, self.rank)


def worker_name(group_name: str, rank: int) -> str:
  r"""The RPC name of rank ``rank`` of group ``group_name``."""
  return f'{group_name}_{rank}'


_context: Optional[DistContext] = None


def get_context() -> Optional[DistContext]:
  r"""This process's DistContext, or None before a group is joined."""
  return _context


def set_context(context: Optional[DistContext]) -> None:
  global _context
  _context = context


def init_worker_group(world_size: int, rank: int, group_name: Optional[str] = None) -> DistContext:
  r"""Makes this process rank ``rank`` of a worker group of ``world_size``
  (worker mode: every process of the group both trains and samples).

  Args:
    world_size: processes in the group.
    rank: this process's rank.
    group_name: the group's name (default ``'_default_worker'``).
  """
  context = DistContext(
    DistRole.WORKER, group_name or '_default_worker', world_size, rank, world_size, rank
  )
  set_context(context)
  return context


def init_server_context(
  num_servers: int, server_rank: int, num_clients: int, group_name: Optional[str] = None
) -> DistContext:
  r"""Makes this process server ``server_rank`` of ``num_servers``; the
  servers take global ranks ``0..num_servers-1``, the clients the next."""
  context = DistContext(
    DistRole.SERVER,
    group_name or '_default_server',
    num_servers,
    server_rank,
    num_servers + num_clients,
    server_rank,
  )
  set_context(context)
  return context


def init_client_context(
  num_servers: int, num_clients: int, client_rank: int, group_name: Optional[str] = None
) -> DistContext:
  r"""Makes this process client ``client_rank`` of ``num_clients``."""
  context = DistContext(
    DistRole.CLIENT,
    group_name or '_default_client',
    num_clients,
    client_rank,
    num_servers + num_clients,
    num_servers + client_rank,
  )
  set_context(context)
  return context


def get_clients_to_servers() -> Dict[int, List[int]]:
  r"""The servers each client uses by default, by client rank: clients are
  spread over the servers in turn, and when there are more servers than
  clients each client takes every ``num_clients``-th server."""
  ctx = get_context()
  if ctx is None or ctx.is_worker():
    raise RuntimeError('get_clients_to_servers needs a server or client context')
  num_servers, num_clients = ctx.num_servers(), ctx.num_clients()
  return {
    c: list(range(c, num_servers, num_clients)) if num_servers > num_clients else [c % num_servers]
    for c in range(num_clients)
  }


def assign_server_by_order() -> List[int]:
  r"""The servers this client uses by default (see ``get_clients_to_servers``)."""
  ctx = get_context()
  if ctx is None or not ctx.is_client():
    raise RuntimeError('assign_server_by_order needs a client context: call init_client first')
  return get_clients_to_servers()[ctx.rank]
