"""What every channel is: a queue of sampled messages between processes."""

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Tuple, Union

import torch


@dataclass(frozen=True)
class DeferredTensor:
  r"""A message entry written straight into its place when the message is
  sent: a tensor of ``shape`` and ``dtype`` that ``write(out)`` fills.
  :class:`ShmChannel` hands ``write`` the entry's bytes in shared memory,
  which saves copying a computed tensor there (a sampler's feature rows);
  :meth:`materialize` makes it a tensor.

  Args:
    shape: the tensor's shape.
    dtype: its dtype.
    write: fills a contiguous CPU tensor of that shape and dtype.
  """

  shape: Tuple[int, ...]
  dtype: torch.dtype
  write: Callable[[torch.Tensor], None]

  def materialize(self) -> torch.Tensor:
    r"""The entry as a new tensor."""
    out = torch.empty(self.shape, dtype=self.dtype)
    self.write(out)
    return out


SampleMessage = Dict[str, torch.Tensor]
r"""A sampled batch on its way to the trainer: named tensors (on their way
into a :class:`ShmChannel`, some may be :class:`DeferredTensor`)."""


def message_nbytes(msg: SampleMessage) -> int:
  r"""The bytes of a message's tensors."""
  return sum(t.numel() * t.element_size() for t in msg.values())


class QueueTimeoutError(TimeoutError):
  r"""Nothing arrived (recv), or no room freed up (send), within the timeout."""


class ChannelClosedError(QueueTimeoutError, RuntimeError):
  r"""The other side of a channel is gone: every producer exited while the
  consumer waited, or the consumer exited while a producer waited for room.

  It is a :class:`QueueTimeoutError` too, so GLT code that polls with
  ``recv(timeout_ms=...)`` and catches ``QueueTimeoutError`` to check
  whether its producers are done keeps working: it gets this error at once
  instead of waiting out its timeout."""


class ChannelBase(ABC):
  r"""A queue of :obj:`SampleMessage` from sampler processes to a consumer."""

  @abstractmethod
  def send(self, msg: SampleMessage, **kwargs) -> None:
    r"""Queues ``msg``, waiting for room if the channel is full."""

  @abstractmethod
  def recv(self, **kwargs) -> SampleMessage:
    r"""Returns the oldest message, waiting for one if the channel is empty."""


def split_message(
  msg: Mapping[str, torch.Tensor], deferred: bool = False
) -> Tuple[List[str], List[Union[torch.Tensor, DeferredTensor]]]:
  r"""The keys and tensors of ``msg``, checked.

  Args:
    msg: the message.
    deferred: whether entries may be :class:`DeferredTensor`.

  Raises:
    TypeError: ``msg`` is not a mapping of str to tensors.
  """
  if not isinstance(msg, Mapping):
    raise TypeError(f'a message must be a dict of str to tensors, got {type(msg).__name__}')
  keys, tensors = [], []
  for key, value in msg.items():
    if not isinstance(key, str):
      raise TypeError(f'message keys must be str, got {key!r}')
    if not isinstance(value, torch.Tensor) and not (deferred and isinstance(value, DeferredTensor)):
      raise TypeError(f"message entry '{key}' must be a tensor, got {type(value).__name__}")
    keys.append(key)
    tensors.append(value)
  return keys, tensors


# Longer waits than this (about 292 years) are no timeout at all.
_FOREVER_MS = 2**63 // 1000


def timeout_ms_arg(timeout_ms: Optional[float]) -> int:
  r"""A timeout in milliseconds for the C++ queue: -1 for none (``None``,
  ``inf`` or anything too long to count in microseconds)."""
  if timeout_ms is None:
    return -1
  if (
    isinstance(timeout_ms, bool)
    or not isinstance(timeout_ms, (int, float))
    or math.isnan(timeout_ms)
    or timeout_ms < 0
  ):
    raise ValueError(f'timeout_ms must be a non-negative number or None, got {timeout_ms!r}')
  return -1 if timeout_ms >= _FOREVER_MS else int(timeout_ms)
