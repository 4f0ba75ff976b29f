"""ShmChannel: a queue of tensor messages in shared memory (C++)."""

import logging
import os
import pickle
from multiprocessing import reduction
from typing import Dict, List, Optional, Tuple, Union

import torch
import torch.multiprocessing  # noqa: F401  (torch's reductions of CUDA tensors, for ForkingPickler)

from .._ext import ops
from ..utils.host_share import boot_id, open_host_fd
from ..utils.memory import require_memory
from ..utils.units import parse_size
from .base import (
  ChannelBase,
  ChannelClosedError,
  QueueTimeoutError,
  SampleMessage,
  split_message,
  timeout_ms_arg,
)

logger = logging.getLogger(__name__)

_OK, _TIMEOUT, _PEER_GONE, _NO_MEMORY = 0, 1, 2, 3

# A message entry that holds a CUDA tensor's IPC handle, pickled
# (share_cuda_tensors): its key is the tensor's, after this prefix.
CUDA_IPC_PREFIX = '\x00cuda_ipc:'
# GLT_CHANNEL_CUDA_IPC=0 copies CUDA tensors through the channel's memory
# even where share_cuda_tensors asked for handles.
CUDA_IPC_ENV = 'GLT_CHANNEL_CUDA_IPC'


# Memory left free beside a message that extends the channel's backing: the
# process goes on allocating while it sends.
SEND_MARGIN_BYTES = 32 << 20


def _check_memory(shm_size: int) -> None:
  """Refuses a channel larger than the memory this process can still get."""
  require_memory(
    shm_size,
    lambda available, source: (
      f'a shared-memory channel of {shm_size} bytes ({shm_size / 2**30:.2f} GiB) is larger than '
      f'the {available} bytes ({available / 2**30:.2f} GiB) this process can still get '
      f'({source}); use a smaller shm_size (channel_size / buffer_size)'
    ),
  )


def _check_room_for(nbytes: int) -> None:
  """Refuses a message that would take memory the process cannot get: under
  a memory cgroup, backing it would call the OOM killer rather than fail."""
  require_memory(
    nbytes + SEND_MARGIN_BYTES,
    lambda available, source: (
      f'no memory for a message of {nbytes} bytes in the shared-memory channel: '
      f'{available} bytes are left ({source}); free memory or receive (and release) '
      'earlier messages'
    ),
  )


class ShmChannel(ChannelBase):
  r"""A bounded queue of messages in shared memory, for many producer
  processes and one consumer.

  A message is written once, into the channel's shared memory; the tensors
  that :meth:`recv` returns view that memory directly, and its block returns
  to the channel when the last of them is released. So keep at most
  ``shm_size`` bytes of received messages alive (``clone()`` what you keep
  longer), or producers wait for room.

  The memory is an anonymous segment: it has no name in ``/dev/shm`` and is
  freed when the last process using it exits, however it exits. Pass the
  channel to processes as an argument of ``multiprocessing`` /
  ``torch.multiprocessing`` (it pickles as a duplicated file descriptor).

  Waits notice dead peers: :meth:`recv` raises :class:`ChannelClosedError`
  when every producer has exited and nothing is left, :meth:`send` when the
  process that made the channel has exited; a producer that dies while
  writing leaves nothing behind for the others.

  Args:
    capacity: most messages queued at once.
    shm_size: bytes of message data the channel holds, as an int or a string
      such as ``'256MB'``. Memory backs them as messages first reach them
      (the channel costs nothing up front, as GLT's); a size larger than the
      memory this process can get (the machine's, or its memory cgroup's)
      is a ``MemoryError`` here, and a message that finds no memory left is
      a ``MemoryError`` in ``send``. A message takes its tensors' bytes plus
      64 bytes per tensor and 64 more.
  """

  def __init__(self, capacity: int = 128, shm_size: Union[str, int] = '256MB'):
    if isinstance(capacity, bool) or not isinstance(capacity, int):
      raise TypeError(f'capacity must be an int, got {capacity!r}')
    shm_size = parse_size(shm_size)
    _check_memory(shm_size)
    self._queue = ops.ShmQueue(capacity, shm_size)
    self._pinned = False
    self._cuda_ipc = False

  @classmethod
  def _attach(cls, fd: reduction.DupFd, cuda_ipc: bool = False) -> 'ShmChannel':
    channel = cls.__new__(cls)
    channel._queue = ops.ShmQueue.attach(fd.detach())
    channel._pinned = False
    channel._cuda_ipc = cuda_ipc
    return channel

  def __reduce__(self):
    return (ShmChannel._attach, (reduction.DupFd(self._queue.fd), self._cuda_ipc))

  def host_handle(self) -> Tuple[str, int, int]:
    r"""``(host boot id, pid, descriptor)``: how another process of this
    host and user opens the channel (``open_host_handle``), also one that
    gets the handle over RPC."""
    return boot_id(), os.getpid(), self._queue.fd

  @classmethod
  def open_host_handle(cls, handle: Tuple[str, int, int]) -> 'ShmChannel':
    r"""Opens the channel of a ``host_handle``.

    Raises:
      HostShareError: the channel is on another host, or its process is
        gone or not this user's.
    """
    own = open_host_fd(*handle)
    channel = cls.__new__(cls)
    channel._queue = ops.ShmQueue.attach(own)  # it owns the descriptor from here
    channel._pinned = False
    channel._cuda_ipc = False
    return channel

  @property
  def shares_cuda_tensors(self) -> bool:
    r"""Whether CUDA tensors go as IPC handles (``share_cuda_tensors``)."""
    return self._cuda_ipc

  def share_cuda_tensors(self) -> bool:
    r"""Sends the CUDA tensors of messages as CUDA IPC handles of their
    memory (torch's, as ``torch.multiprocessing`` sends them), which the
    consumer opens on its host's GPU and copies into memory of its own
    there, releasing the producer's at once: a batch sampled on a GPU
    reaches a trainer on that GPU by a device-to-device copy, not through
    host memory and back, and what the trainer holds does not depend on the
    producer living on. Set before the channel goes to its producers (it
    travels with it); ``GLT_CHANNEL_CUDA_IPC=0`` keeps the copies through
    the channel.

    Returns:
      Whether CUDA tensors go as handles.
    """
    self._cuda_ipc = os.environ.get(CUDA_IPC_ENV, '1') != '0'
    return self._cuda_ipc

  @property
  def capacity(self) -> int:
    r"""Most messages queued at once."""
    return self._queue.capacity

  @property
  def shm_size(self) -> int:
    r"""Bytes of message data the channel holds."""
    return self._queue.shm_size

  def send(self, msg: SampleMessage, timeout_ms: Optional[float] = None, **kwargs) -> None:
    r"""Copies ``msg`` into the channel and queues it; its
    :class:`DeferredTensor` entries are written straight into their places.

    Args:
      msg: named tensors (CPU or CUDA, any dtype, dense) and deferred ones.
      timeout_ms: most milliseconds to wait for room; ``None`` waits as long
        as the consumer lives.

    Raises:
      QueueTimeoutError: no room within ``timeout_ms``.
      ChannelClosedError: the process that made the channel has exited.
      ValueError: the message is larger than ``shm_size``.
      MemoryError: no memory is left to back the message.
    """
    keys, values = split_message(msg, deferred=True)
    if self._cuda_ipc:
      keys, values = cuda_ipc_entries(keys, values)
    templates = [
      value
      if isinstance(value, torch.Tensor)
      else torch.empty(value.shape, dtype=value.dtype, device='meta')
      for value in values
    ]
    if self._queue.backed_bytes < self._queue.shm_size:  # may need new memory
      _check_room_for(ops.ShmQueue.message_bytes(keys, templates))
    status, error, reservation = self._queue.reserve(keys, templates, timeout_ms_arg(timeout_ms))
    if status == _TIMEOUT:
      raise QueueTimeoutError(
        f'no room in the channel within {timeout_ms} ms: {self._queue.size()} of '
        f'{self.capacity} messages queued, {self._queue.free_bytes()} of {self.shm_size} '
        'bytes free (received messages still alive hold their bytes)'
      )
    if status == _PEER_GONE:
      raise ChannelClosedError(error)
    if status == _NO_MEMORY:
      raise MemoryError(error)
    try:
      places = None
      gpus = set()
      for i, value in enumerate(values):
        if isinstance(value, torch.Tensor) and not value.is_cuda:
          reservation.write(i, value)
          continue
        places = reservation.views if places is None else places
        if isinstance(value, torch.Tensor):
          # queued behind the value's kernels, waited for once a device
          places[i].copy_(value, non_blocking=True)
          gpus.add(value.device)
        else:
          value.write(places[i])
      for gpu in gpus:
        torch.cuda.current_stream(gpu).synchronize()
      del places  # the consumer owns the bytes once the message is queued
      reservation.commit()
    except BaseException:
      reservation.abort()
      raise

  def recv(self, timeout_ms: Optional[float] = None, **kwargs) -> SampleMessage:
    r"""Returns the oldest message; its tensors view the channel's memory.

    Args:
      timeout_ms: most milliseconds to wait; ``None`` waits as long as a
        producer lives (or none has started yet).

    Raises:
      QueueTimeoutError: nothing arrived within ``timeout_ms``.
      ChannelClosedError: every producer has exited and the channel is empty.
    """
    status, error, keys, tensors = self._queue.recv(timeout_ms_arg(timeout_ms))
    if status == _TIMEOUT:
      raise QueueTimeoutError(f'no message arrived within {timeout_ms} ms')
    if status == _PEER_GONE:
      raise ChannelClosedError(error)
    return dict(opened_entry(key, tensor) for key, tensor in zip(keys, tensors))

  def empty(self) -> bool:
    r"""Whether no message is queued."""
    return self._queue.empty()

  def qsize(self) -> int:
    r"""Messages queued now."""
    return self._queue.size()

  def stats(self) -> Dict[str, int]:
    r"""A snapshot of the channel: ``queued`` messages, ``pending`` ones being
    written, ``used_bytes``, ``free_bytes``, ``backed_bytes`` (the prefix of the
    region that memory backs) and ``processes`` recorded as using it."""
    return dict(self._queue.stats())

  def pin_memory(self) -> bool:
    r"""Page-locks the channel's memory in this process for CUDA
    (``cudaHostRegister``), so received tensors copy to the GPU at full speed
    and ``non_blocking``; in a producer, so sent CUDA tensors copy from the
    GPU straight into the channel, all of a message's at once. The
    registration lasts as long as the process.

    Returns:
      Whether the memory is pinned; ``False``, with a warning, without CUDA.
    """
    if self._pinned:
      return True
    if not torch.cuda.is_available():
      logger.warning('ShmChannel.pin_memory: CUDA is not available, the channel stays unpinned')
      return False
    err = torch.cuda.cudart().cudaHostRegister(
      self._queue.mapping_address, self._queue.mapping_size, 0
    )
    if int(err) != 0:
      raise RuntimeError(f'cudaHostRegister of the channel memory failed: {err}')
    self._pinned = True
    return True


def cuda_ipc_entries(keys: List[str], values: List) -> Tuple[List[str], List]:
  r"""A message's entries with each CUDA tensor replaced by its CUDA IPC
  handle, pickled as ``torch.multiprocessing`` pickles it (the memory held
  for the consumer, which waits for the tensor's pending kernels when it
  opens it), under its key after ``CUDA_IPC_PREFIX``."""
  cuda = [isinstance(v, torch.Tensor) and v.is_cuda for v in values]
  if not any(cuda):
    return keys, values
  torch.cuda.ipc_collect()  # frees what consumers released since the last message
  out_keys, out_values = [], []
  for key, value, is_cuda in zip(keys, values, cuda):
    if is_cuda:
      handle = bytes(reduction.ForkingPickler.dumps(value))
      key, value = CUDA_IPC_PREFIX + key, torch.frombuffer(bytearray(handle), dtype=torch.uint8)
    out_keys.append(key)
    out_values.append(value)
  return out_keys, out_values


def opened_entry(key: str, tensor: torch.Tensor) -> Tuple[str, torch.Tensor]:
  r"""A received entry: a CUDA IPC handle (``cuda_ipc_entries``) opened and
  copied into this process's memory, under its own key (the producer's
  memory is released as the opened tensor is: torch waits for the copy
  first); any other entry as it is."""
  if not key.startswith(CUDA_IPC_PREFIX):
    return key, tensor
  key = key[len(CUDA_IPC_PREFIX) :]
  try:
    opened = pickle.loads(tensor.numpy().tobytes())
  except (RuntimeError, OSError) as e:
    raise RuntimeError(
      f"the CUDA tensor '{key}' of a received message could not be opened (its producer "
      f'may have exited after sending it): {type(e).__name__}: {e}'
    ) from e
  return key, opened.clone()
