"""Tensors that any process of this host can map by a handle.

torch's shared memory (``share_memory_``) reaches only the processes that get
a tensor through multiprocessing's pickling. A host-shared tensor lives in a
memfd that its holder keeps open; another process of the same host and user
maps it from ``/proc/<pid>/fd/<fd>`` given its ``HostTensorHandle``, a few
plain values that travel over RPC as well as through pickling. Every process
that maps it holds a descriptor of its own too, so it can hand the tensor on.
The memory is freed when the last descriptor and mapping go, also when the
processes crash: nothing is left in /dev/shm.

A header before the data holds a random token that the handle carries, so a
handle that reaches a process of another host, or of another PID namespace
where the same pid names another process, is refused rather than misread.
"""

import os
import select
import stat
import weakref
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import torch

from .._ext import ops
from .huge_pages import collapse_own

HEADER_BYTES = 4096  # keeps the data page-aligned
MAGIC = b'GLTHOST1'
TOKEN_BYTES = 16


class HostShareError(OSError):
  r"""A host-shared tensor could not be made or mapped here."""


def boot_id() -> str:
  r"""This host's boot id: the same in every process of the host (and its
  containers), different on another host."""
  try:
    with open('/proc/sys/kernel/random/boot_id') as f:
      return f.read().strip()
  except OSError:
    return ''


def host_sharing_available() -> bool:
  r"""Whether this platform can make host-shared tensors (Linux memfds)."""
  return hasattr(os, 'memfd_create') and boot_id() != ''


# GLT_SHARE_HOST_PARTITIONS=0 keeps every other partition on RPC, also where
# it is held on this host (for one machine standing in for several hosts).
SHARE_HOST_PARTITIONS_ENV = 'GLT_SHARE_HOST_PARTITIONS'


def share_host_partitions() -> bool:
  r"""Whether the partitions of a distributed group held on one host map
  each other's topologies and feature tables from shared memory and run
  each other's sampling steps in place (``$GLT_SHARE_HOST_PARTITIONS``,
  default on, where the platform can)."""
  return os.environ.get(SHARE_HOST_PARTITIONS_ENV, '1') != '0' and host_sharing_available()


def tensor_bytes(dtype: torch.dtype, shape: Tuple[int, ...]) -> int:
  r"""The bytes of a contiguous tensor of ``dtype`` and ``shape``."""
  count = 1
  for size in shape:
    count *= size
  return count * torch.empty((), dtype=dtype).element_size()


@dataclass(frozen=True)
class HostTensorHandle:
  r"""Where a host-shared tensor lives.

  Args:
    boot_id: the host's boot id.
    pid: a process that holds it open.
    fd: its descriptor in that process.
    token: the random token in the memfd's header.
    dtype: the tensor's dtype.
    shape: the tensor's shape.
  """

  boot_id: str
  pid: int
  fd: int
  token: bytes
  dtype: torch.dtype
  shape: Tuple[int, ...]

  @property
  def nbytes(self) -> int:
    return tensor_bytes(self.dtype, self.shape)


def _map(fd: int, nbytes: int) -> torch.Tensor:
  r"""The memfd ``fd`` of this process, header and data, as uint8, mapped
  2 MB-aligned: where its holder moved its pages onto huge pages, each maps
  whole here too."""
  return ops.map_shared_file(fd, HEADER_BYTES + nbytes)


def _data(mapped: torch.Tensor, handle: HostTensorHandle) -> torch.Tensor:
  data = mapped[HEADER_BYTES : HEADER_BYTES + handle.nbytes]
  return data.view(handle.dtype).view(handle.shape)


def open_host_fd(host: str, pid: int, fd: int) -> int:
  r"""This process's own descriptor of descriptor ``fd`` of process ``pid``
  of host ``host`` (its boot id), read and write.

  Raises:
    HostShareError: it is on another host, or the process is gone or not
      this user's.
  """
  if not host_sharing_available() or host != boot_id():
    raise HostShareError(f'descriptor {fd} of process {pid} is on another host')
  path = f'/proc/{pid}/fd/{fd}'
  try:  # O_NONBLOCK: a stranger's fifo must not block the open
    return os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NONBLOCK)
  except OSError as e:
    raise HostShareError(f'cannot open {path}: {e.strerror}') from e


class HostSharedTensor:
  r"""A tensor in a memfd this process holds open (``tensor``), and the
  ``handle`` another process of this host maps it by. The descriptor is
  closed when this object goes; the tensor stays valid while it is used.

  Make one with ``copy_of`` or ``open``.
  """

  def __init__(self, fd: int, tensor: torch.Tensor, handle: HostTensorHandle):
    self.tensor = tensor
    self.handle = handle
    self._close = weakref.finalize(self, os.close, fd)

  @classmethod
  def copy_of(cls, tensor: torch.Tensor, name: str = 'host-shared tensor') -> 'HostSharedTensor':
    r"""A host-shared copy of ``tensor`` (a CPU tensor), on huge pages where
    the kernel gives them (the processes that map it read it at random).

    Args:
      tensor: what to copy.
      name: what it is, for the log.

    Raises:
      HostShareError: the platform has no memfds.
    """
    if not host_sharing_available():
      raise HostShareError('host-shared tensors need Linux memfds and /proc')
    src = tensor.detach().contiguous()
    nbytes = src.numel() * src.element_size()
    token = os.urandom(TOKEN_BYTES)
    fd = os.memfd_create('glt-host-tensor', os.MFD_CLOEXEC)
    try:
      os.ftruncate(fd, HEADER_BYTES + nbytes)
      mapped = _map(fd, nbytes)
      mapped[: len(MAGIC) + TOKEN_BYTES].copy_(torch.tensor(list(MAGIC + token), dtype=torch.uint8))
      if nbytes:
        mapped[HEADER_BYTES:].copy_(src.view(-1).view(torch.uint8))
      collapse_own(mapped, name)
    except BaseException:
      os.close(fd)
      raise
    handle = HostTensorHandle(boot_id(), os.getpid(), fd, token, src.dtype, tuple(src.shape))
    return cls(fd, _data(mapped, handle), handle)

  @classmethod
  def open(cls, handle: HostTensorHandle) -> 'HostSharedTensor':
    r"""Maps the tensor of ``handle``, held by a process of this host.

    Raises:
      HostShareError: it is on another host, its holder is gone or not this
        user's, or the descriptor is not the tensor the handle names.
    """
    fd = open_host_fd(handle.boot_id, handle.pid, handle.fd)
    path = f'/proc/{handle.pid}/fd/{handle.fd}'
    try:
      info = os.fstat(fd)
      if not stat.S_ISREG(info.st_mode) or info.st_size != HEADER_BYTES + handle.nbytes:
        raise HostShareError(f'{path} is not the host-shared tensor of the handle')
      mapped = _map(fd, handle.nbytes)
      header = bytes(mapped[: len(MAGIC) + TOKEN_BYTES].tolist())
      if header != MAGIC + handle.token:
        raise HostShareError(f'{path} is not the host-shared tensor of the handle')
    except BaseException:
      os.close(fd)
      raise
    own = HostTensorHandle(
      handle.boot_id, os.getpid(), fd, handle.token, handle.dtype, handle.shape
    )
    return cls(fd, _data(mapped, own), own)


class ProcessWatch:
  r"""Tells, without waiting, whether one of some processes of this host has
  exited (Linux pidfds): ``check`` costs one system call. A process that
  maps another's memory keeps it valid after its holder died, so a process
  that runs a peer's work in place learns of the peer's death here, not from
  a failed request.
  """

  def __init__(self):
    self._epoll = select.epoll() if hasattr(select, 'epoll') else None  # Linux only
    self._names: Dict[int, str] = {}  # pidfd -> how an error names its process
    self._close = weakref.finalize(self, _close_watch, self._epoll, self._names)

  def add(self, pid: int, name: str) -> None:
    r"""Watches process ``pid``, which an error calls ``name``.

    Raises:
      HostShareError: it cannot be watched (it is gone, or this platform has
        no pidfds).
    """
    try:
      if self._epoll is None:
        raise OSError('no epoll on this platform')
      fd = os.pidfd_open(pid)
    except (AttributeError, OSError) as e:
      raise HostShareError(f'cannot watch process {pid}: {e}') from e
    self._names[fd] = name
    self._epoll.register(fd, select.EPOLLIN)

  def exited(self) -> Optional[str]:
    r"""The name of a watched process that has exited (a zombie counts),
    else None."""
    return self._first_exited(0)

  def wait(self) -> Optional[str]:
    r"""Waits until a watched process exits and returns its name (None at
    once where nothing is watched)."""
    return self._first_exited(None)

  def _first_exited(self, timeout: Optional[float]) -> Optional[str]:
    if not self._names:
      return None
    for fd, _ in self._epoll.poll(timeout):
      return self._names[fd]
    return None

  def check(self) -> None:
    r"""Raises RuntimeError naming a watched process that has exited."""
    name = self.exited()
    if name is not None:
      raise RuntimeError(f'{name} exited')


def _close_watch(epoll, names: Dict[int, str]) -> None:
  if epoll is not None:
    epoll.close()
  for fd in names:
    os.close(fd)
