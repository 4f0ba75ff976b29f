"""The settings every way into an RPC world takes, checked where they are
given: a port, a thread count, a timeout. torch's RPC reads a timeout of 0
as "wait forever", and a rendezvous on port 0 that peers cannot find waits
out its timeout, so neither is passed on."""

import math
import numbers
from typing import Optional, Union


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
