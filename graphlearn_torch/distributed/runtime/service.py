"""Calling another process's service by name: the object it serves with
``rpc_serve`` (a server's ``DistServer``), its methods run in that process."""

import torch
from torch.distributed import rpc

from ...utils.futures import then
from .context import DistRole, get_context
from .payload import sent_alone
from .rpc import rpc_global_request_async, rpc_local_service


def _is_method_of(obj: object, func) -> bool:
  return getattr(type(obj), getattr(func, '__name__', ''), None) is func


@rpc.functions.async_execution
def _call_service(func, args, kwargs) -> torch.futures.Future:
  r"""Runs a peer's request on this process's service: the method named
  ``func``, the method ``func`` of the service's class, or any other
  function ``func``. A result that is a future is awaited without holding an
  RPC thread."""
  out = torch.futures.Future()
  try:
    service = rpc_local_service()
    if service is None and (isinstance(func, str) or not callable(func)):
      raise RuntimeError(f'{get_context()} serves nothing')
    if isinstance(func, str):
      if func.startswith('_') or not callable(getattr(service, func, None)):
        raise AttributeError(f'{type(service).__name__} has no method {func!r}')
      result = getattr(service, func)(*args, **kwargs)
    elif service is not None and _is_method_of(service, func):
      result = func(service, *args, **kwargs)
    else:
      result = func(*args, **kwargs)
  except Exception as e:
    out.set_exception(e)
    return out
  if isinstance(result, torch.Future):  # torch.futures.Future and what .then() returns
    return then(result, lambda done: sent_alone(done.value()))
  out.set_result(sent_alone(result))
  return out


def rpc_service_request_async(
  target_role: DistRole, role_rank: int, func, args=None, kwargs=None, timeout=None
) -> torch.futures.Future:
  r"""Calls the service of rank ``role_rank`` of the group of ``target_role``
  (see ``rpc_serve``); returns a future of the result, which raises the
  service's error, if any.

  Args:
    target_role: the role of the serving process.
    role_rank: its rank in its group.
    func: a method name of the service, a method of its class, or any other
      function to run there.
    args: positional arguments.
    kwargs: keyword arguments.
    timeout: seconds before the future fails (default: the RPC timeout).
  """
  reply = rpc_global_request_async(
    target_role,
    role_rank,
    _call_service,
    (func, tuple(args or ()), dict(kwargs or {})),
    None,
    timeout,
  )
  # An error that _call_service sets on its future reaches the caller as the
  # reply's value, the exception object itself (torch RPC's behaviour of
  # async_execution functions); it is raised again here, with its own type.
  out = torch.futures.Future()

  def deliver(done: torch.futures.Future) -> None:
    try:
      value = done.value()
    except Exception as e:  # the request itself failed (a dead peer, a timeout)
      out.set_exception(e)
      return
    if isinstance(value, BaseException):
      out.set_exception(value)
    else:
      out.set_result(value)

  reply.add_done_callback(deliver)
  return out
