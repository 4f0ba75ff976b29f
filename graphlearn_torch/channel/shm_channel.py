"""ShmChannel: a queue of tensor messages in shared memory (C++)."""

import logging
import os
from multiprocessing import reduction
from typing import Dict, List, Optional, Tuple, Union

import torch

from .._ext import ops
from ..utils.cuda_share import CudaIpcTensor
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
from .device_mirror import MIRRORED_PREFIX, DeviceMirror

logger = logging.getLogger(__name__)

_OK, _TIMEOUT, _PEER_GONE, _NO_MEMORY = 0, 1, 2, 3

# GLT_CHANNEL_CUDA_IPC=0 copies CUDA tensors through the channel's memory
# even where share_cuda_tensors asked for the consumer's GPU mirror.
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
    self._mirror: Optional[DeviceMirror] = None

  @classmethod
  def _attach(cls, fd: reduction.DupFd, mirror: Optional[CudaIpcTensor] = None) -> 'ShmChannel':
    channel = cls.__new__(cls)
    channel._queue = ops.ShmQueue.attach(fd.detach())
    channel._pinned = False
    channel._mirror = DeviceMirror(mirror) if mirror is not None else None
    return channel

  def __reduce__(self):
    mirror = self._mirror.shareable() if self._mirror is not None else None
    return (ShmChannel._attach, (reduction.DupFd(self._queue.fd), mirror))

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
    channel._mirror = None
    return channel

  @property
  def shares_cuda_tensors(self) -> bool:
    r"""Whether CUDA tensors go through the consumer's GPU mirror
    (``share_cuda_tensors``)."""
    return self._mirror is not None and self._mirror.device_type == 'cuda'

  def share_cuda_tensors(self, device: Optional[torch.device] = None) -> bool:
    r"""Sends the CUDA tensors of messages device to device: this process,
    the consumer, allocates a buffer on its GPU as large as the channel's
    memory (``mapping_size`` bytes), which each producer opens once by its CUDA
    IPC handle; a message's CUDA tensors are written there at the places the
    channel gives them, and ``recv`` copies them into memory of the
    consumer's own on that GPU. A batch sampled on a GPU thus reaches a
    trainer on a GPU without going through host memory, and what the
    trainer holds does not depend on the producer living on. Call it before
    the channel goes to its producers (the buffer's handle travels with
    it). ``GLT_CHANNEL_CUDA_IPC=0`` keeps the copies through the channel's
    memory.

    Args:
      device: the consumer's GPU (default: the current one).

    Returns:
      Whether CUDA tensors go device to device (not without CUDA).
    """
    if os.environ.get(CUDA_IPC_ENV, '1') == '0' or not torch.cuda.is_available():
      return False
    device = torch.device(device if device is not None else 'cuda')
    if device.type != 'cuda':
      raise ValueError(f'share_cuda_tensors needs a GPU, got {device}')
    if device.index is None:
      device = torch.device('cuda', torch.cuda.current_device())
    self.mirror(DeviceMirror.allocate(self._queue.mapping_size, device))
    return True

  def mirror(self, mirror: DeviceMirror) -> None:
    r"""Writes the tensors of messages on ``mirror``'s type of device into
    ``mirror`` (a buffer of the consumer's of ``mapping_size`` bytes,
    ``DeviceMirror``) rather than into the channel's memory, and receives
    them from there (``share_cuda_tensors`` sets a GPU mirror).

    Raises:
      ValueError: the mirror is smaller than the channel's mapping
        (``mapping_size``: its memory and its header).
    """
    if mirror.memory.numel() < self.mapping_size:
      raise ValueError(
        f'a mirror of {mirror.memory.numel()} bytes is smaller than the channel '
        f'({self.mapping_size} bytes with its header)'
      )
    self._mirror = mirror

  @property
  def capacity(self) -> int:
    r"""Most messages queued at once."""
    return self._queue.capacity

  @property
  def shm_size(self) -> int:
    r"""Bytes of message data the channel holds."""
    return self._queue.shm_size

  @property
  def waiting_for_room(self) -> int:
    r"""Producers waiting for room in the channel now. While the consumer
    waits for a message, they wait for bytes that only the consumer can
    free (by dropping messages it received)."""
    return self._queue.waiting_for_room

  @property
  def mapping_size(self) -> int:
    r"""Bytes of the channel's shared memory: ``shm_size`` and the header."""
    return self._queue.mapping_size

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
    mirrored = [self._mirrors(value) for value in values]
    keys = [MIRRORED_PREFIX + key if m else key for key, m in zip(keys, mirrored)]
    templates = [
      value
      if isinstance(value, torch.Tensor)
      else torch.empty(value.shape, dtype=value.dtype, device='meta')
      for value in values
    ]
    if self._queue.backed_bytes < self._queue.shm_size:  # may need new memory
      needed = self._queue.new_backing(keys, templates, mirrored)
      if needed:  # (reading what is available takes 0.1-0.2 ms: only then)
        _check_room_for(needed)
    status, error, reservation = self._queue.reserve(
      keys, templates, timeout_ms_arg(timeout_ms), elsewhere=mirrored
    )
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
      self._write(reservation, values, mirrored)
      reservation.commit()
    except BaseException:
      reservation.abort()
      raise

  def _mirrors(self, value) -> bool:
    r"""Whether ``value`` goes through the mirror (a tensor on its type of
    device)."""
    mirror = self._mirror
    return (
      mirror is not None
      and isinstance(value, torch.Tensor)
      and value.device.type == mirror.device_type
    )

  def _offset(self, view: torch.Tensor) -> int:
    r"""Where ``view`` (of this process's mapping) lies in the channel's
    memory: the same in every process."""
    return view.data_ptr() - self._queue.mapping_address

  def _write(self, reservation, values: List, mirrored: List[bool]) -> None:
    r"""Writes a reserved message's values into their places: host tensors
    by the channel, the mirrored ones into the mirror, other CUDA tensors
    behind their kernels (waited for once a device), deferred ones by their
    ``write``."""
    places, into_mirror, gpus = None, [], set()
    for i, value in enumerate(values):
      if isinstance(value, torch.Tensor) and not value.is_cuda and not mirrored[i]:
        reservation.write(i, value)
        continue
      places = reservation.views if places is None else places
      if mirrored[i]:
        into_mirror.append((self._offset(places[i]), value))
      elif isinstance(value, torch.Tensor):
        places[i].copy_(value, non_blocking=True)
        gpus.add(value.device)
      else:
        value.write(places[i])
    if into_mirror:
      self._mirror.write(into_mirror)
    for gpu in gpus:
      torch.cuda.current_stream(gpu).synchronize()
    # the consumer owns the bytes once the message is queued: no view is kept

  def recv(self, timeout_ms: Optional[float] = None, **kwargs) -> SampleMessage:
    r"""Returns the oldest message; its tensors view the channel's memory,
    but for those that came through the mirror (``share_cuda_tensors``),
    which are copies of this process's own.

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
    return self._received(keys, tensors)

  def _received(self, keys: List[str], tensors: List[torch.Tensor]) -> SampleMessage:
    r"""A received message, its mirrored entries copied out of the mirror
    (their places in the channel are free once the views here are)."""
    mirrored = [i for i, key in enumerate(keys) if key.startswith(MIRRORED_PREFIX)]
    if not mirrored:
      return dict(zip(keys, tensors))
    if self._mirror is None:
      key = keys[mirrored[0]][len(MIRRORED_PREFIX) :]
      raise RuntimeError(
        f"a received message has an entry in a device mirror ('{key}'), but this channel "
        'has none: only the process that set the mirror receives such messages'
      )
    copies = self._mirror.read([(self._offset(tensors[i]), tensors[i]) for i in mirrored])
    for i, copy in zip(mirrored, copies):
      keys[i], tensors[i] = keys[i][len(MIRRORED_PREFIX) :], copy
    return dict(zip(keys, tensors))

  def empty(self) -> bool:
    r"""Whether no message is queued."""
    return self._queue.empty()

  def qsize(self) -> int:
    r"""Messages queued now."""
    return self._queue.size()

  def stats(self) -> Dict[str, int]:
    r"""A snapshot of the channel: ``queued`` messages, ``pending`` ones being
    written, ``used_bytes``, ``free_bytes``, ``backed_bytes`` (the bytes of the
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
