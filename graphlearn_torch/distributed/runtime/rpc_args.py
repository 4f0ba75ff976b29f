"""The settings every way into an RPC world takes, checked where they are
given: a port, a thread count, a timeout. torch's RPC reads a timeout of 0
as "wait forever", and a rendezvous on port 0 that peers cannot find waits
out its timeout, so neither is passed on. And the TensorPipe transports and
channels a process offers its peers, from the environment."""

import math
import numbers
import os
from typing import List, Optional, Union


def checked_port(port: Union[int, str], name: str = 'master_port', free: bool = False) -> int:
  """``port`` as an int in [1, 65535] (or 0 too, where ``free`` says 0 picks
  a free port).

  Args:
    port: the port, an int or a string of digits.
    name: the argument, for the message.
    free: whether 0 (a free port) is allowed.
  """
  try:
    value = int(port)
  except (TypeError, ValueError):
    raise ValueError(f'{name} must be a port number, got {port!r}') from None
  if not (0 if free else 1) <= value <= 65535 or isinstance(port, (bool, float)):
    raise ValueError(f'{name} must be a port number in [{int(not free)}, 65535], got {port!r}')
  return value


def checked_timeout(seconds: float, name: str = 'rpc_timeout') -> float:
  """``seconds`` as a float: a finite number > 0.

  Args:
    seconds: the timeout.
    name: the argument, for the message.
  """
  if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
    raise ValueError(f'{name} must be a number of seconds, got {seconds!r}')
  if not math.isfinite(seconds) or seconds <= 0:
    raise ValueError(f'{name} must be a finite number of seconds > 0, got {seconds!r}')
  return float(seconds)


def checked_threads(count: Optional[int], name: str = 'num_rpc_threads') -> Optional[int]:
  """``count`` (None: the caller's default) as a positive int.

  Args:
    count: the thread count, or None.
    name: the argument, for the message.
  """
  if count is None:
    return None
  if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
    raise ValueError(f'{name} must be a positive integer, got {count!r}')
  return int(count)


# TensorPipe transports between RPC peers, best first: 'uv' (TCP) waits in
# epoll where 'shm' busy-polls (docs/benchmarks.md: "worker mode without the
# busy-polling transport").
# GLT_RPC_TRANSPORTS (comma-separated: 'uv', 'shm', 'ibv') overrides it for
# every process of a job, which inherit the environment.
DEFAULT_RPC_TRANSPORTS = ('uv',)
TRANSPORTS_ENV = 'GLT_RPC_TRANSPORTS'
# TensorPipe's channels, which carry the tensors: TensorPipe's own choice
# unless GLT_RPC_CHANNELS names them ('mpt_uv', 'basic', 'cma', ...). Peers on
# one machine exchange CPU tensors by cross-memory attach ('cma'), also from
# separate network namespaces: 'mpt_uv,basic' keeps them on the network, as
# between machines.
CHANNELS_ENV = 'GLT_RPC_CHANNELS'
KNOWN_CHANNELS = {'basic', 'mpt_uv', 'cma', 'xth', 'cuda_ipc', 'cuda_gdr', 'cuda_xth', 'cuda_basic'}


def _names_from_env(env: str, known: set, what: str) -> Optional[List[str]]:
  r"""The comma-separated names of ``$env``, each one of ``known``; None
  where the variable is unset or empty."""
  value = os.environ.get(env, '')
  chosen = [n.strip() for n in value.split(',') if n.strip()]
  unknown = sorted(set(chosen) - known)
  if unknown:
    raise ValueError(
      f'{env}={value!r} names unknown TensorPipe {what} {unknown}: choose among '
      + ', '.join(repr(n) for n in sorted(known))
    )
  return chosen or None


def rpc_transports() -> List[str]:
  r"""The TensorPipe transports this process offers its RPC peers:
  ``$GLT_RPC_TRANSPORTS`` (comma-separated) or ``DEFAULT_RPC_TRANSPORTS``."""
  chosen = _names_from_env(TRANSPORTS_ENV, {'uv', 'shm', 'ibv'}, 'transports')
  return chosen or list(DEFAULT_RPC_TRANSPORTS)


def rpc_channels() -> Optional[List[str]]:
  r"""The TensorPipe channels this process offers its RPC peers:
  ``$GLT_RPC_CHANNELS`` (comma-separated), or None for TensorPipe's own."""
  return _names_from_env(CHANNELS_ENV, KNOWN_CHANNELS, 'channels')
