"""Server-client mode, the client side: training processes that sample on
servers (see ``dist_server``). Clients call the servers' methods by name;
this module knows nothing of the server's code."""

import atexit
import logging
from typing import Any, Optional

import torch

from .context import DistRole, get_context, init_client_context, set_context
from .rpc import (
  DEFAULT_RPC_TIMEOUT_S,
  global_barrier,
  init_rpc,
  rpc_is_initialized,
  shutdown_rpc,
)
from .service import rpc_service_request_async

logger = logging.getLogger(__name__)


def init_client(
  num_servers: int,
  num_clients: int,
  client_rank: int,
  master_addr: str,
  master_port: int,
  num_rpc_threads: int = 4,
  client_group_name: Optional[str] = None,
  is_dynamic: bool = False,
  request_timeout: float = DEFAULT_RPC_TIMEOUT_S,
) -> None:
  r"""Makes this process client ``client_rank`` of ``num_clients``, served
  by ``num_servers`` servers. Returns when every server and client has
  joined.

  Args:
    num_servers: servers in the job.
    num_clients: clients in the job.
    client_rank: this client's rank.
    master_addr: the job's rendezvous address (server 0's host).
    master_port: its port.
    num_rpc_threads: threads that serve requests to this client.
    client_group_name: the clients' group name.
    is_dynamic: unsupported; must be False.
    request_timeout: seconds a request to a server may take.
  """
  if is_dynamic:
    raise ValueError('dynamic server-client worlds (is_dynamic=True) are not supported')
  if not isinstance(num_servers, int) or num_servers < 1:
    raise ValueError(f'num_servers must be a positive integer, got {num_servers!r}')
  init_client_context(num_servers, num_clients, client_rank, client_group_name)
  init_rpc(master_addr, master_port, num_rpc_threads, request_timeout)
  # A client that exits without shutdown_client() still leaves cleanly (its
  # servers drop its producers); torch's RPC threads killed at interpreter
  # exit would abort the process.
  atexit.register(shutdown_client)
  global_barrier()  # every server is ready
  logger.info('client %d of %d joined %d servers', client_rank, num_clients, num_servers)


def shutdown_client(timeout: float = 30.0) -> None:
  r"""Leaves the job: every server destroys this client's sampling producers
  (and exits once all its clients are gone); the servers stay usable for the
  other clients. Safe after an error, and a no-op when not a client.

  Args:
    timeout: seconds to wait for each server's acknowledgement.
  """
  ctx = get_context()
  if ctx is None or not ctx.is_client():
    return
  atexit.unregister(shutdown_client)
  try:
    if rpc_is_initialized():
      futures = [
        (s, async_request_server(s, 'client_exit', ctx.rank)) for s in range(ctx.num_servers())
      ]
      for server_rank, fut in futures:
        try:
          fut.wait()
        except Exception as e:  # a dead server has nothing to clean up
          logger.warning('client %d: server %d did not acknowledge: %s', ctx.rank, server_rank, e)
  finally:
    shutdown_rpc(graceful=False)
    set_context(None)


def async_request_server(server_rank: int, func, *args, **kwargs) -> torch.futures.Future:
  r"""Runs ``func`` on server ``server_rank``; returns a future of its
  result, which raises the server's error, if any.

  Args:
    server_rank: the server.
    func: a DistServer method (``DistServer.get_dataset_meta``, run as
      ``func(server, *args, **kwargs)``), its name, or any other function
      (run as ``func(*args, **kwargs)``).
    *args: its positional arguments.
    **kwargs: its keyword arguments.
  """
  ctx = get_context()
  if ctx is None or not ctx.is_client():
    raise RuntimeError('requests to servers need a client: call init_client first')
  return rpc_service_request_async(DistRole.SERVER, server_rank, func, args, kwargs)


def request_server(server_rank: int, func, *args, **kwargs) -> Any:
  r"""``async_request_server(...).wait()``."""
  return async_request_server(server_rank, func, *args, **kwargs).wait()
