"""Tensors over memory-mapped files, handed to other processes of this host
by the file's name.

A table read in place from a file (a partition's ``.npy`` feature table, or
a user's ``np.load(..., mmap_mode='r')``) is a mapping of that file: its
pages are the page cache's. Another process of the same host that maps the
same file reads the same pages, so handing it the file's name and the
table's place in it shares the table without a copy, and keeps it lazy
(pages are read when first touched). A handle names the host (its boot id)
and the file's identity (device and inode), so a process of another host,
or one that sees another file under that name, refuses it. Only a table
whose pages all match the file is handed out so: a page written through a
copy-on-write mapping is this process's alone.
"""

import mmap
import os
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from .host_share import HostShareError, boot_id, host_sharing_available, tensor_bytes


@dataclass(frozen=True)
class MappedFileHandle:
  r"""Where a tensor lies in a file of this host.

  Args:
    boot_id: the host's boot id.
    path: the file.
    device: the file's device (``st_dev``).
    inode: its inode (``st_ino``).
    offset: the tensor's first byte in the file.
    dtype: the tensor's dtype.
    shape: the tensor's shape.
  """

  boot_id: str
  path: str
  device: int
  inode: int
  offset: int
  dtype: torch.dtype
  shape: Tuple[int, ...]

  @property
  def nbytes(self) -> int:
    return tensor_bytes(self.dtype, self.shape)


@dataclass(frozen=True)
class _Mapping:
  start: int
  end: int
  file_offset: int
  device: int
  inode: int
  path: str


def _mapping_of(start: int, end: int) -> Optional[_Mapping]:
  r"""The file mapping of this process that holds ``[start, end)``, if any."""
  with open('/proc/self/maps') as f:
    for line in f:
      fields = line.split(maxsplit=5)
      lo, hi = (int(x, 16) for x in fields[0].split('-'))
      if not lo <= start < hi:
        continue
      if end > hi or len(fields) < 6 or int(fields[4]) == 0:
        return None  # past the mapping's end, or anonymous memory
      path = fields[5].rstrip('\n')
      if not path.startswith('/') or path.endswith('(deleted)'):
        return None
      major, minor = (int(x, 16) for x in fields[3].split(':'))
      return _Mapping(lo, hi, int(fields[2], 16), os.makedev(major, minor), int(fields[4]), path)
  return None


def _copied_kb(mapping: _Mapping) -> Optional[int]:
  r"""The kB of ``mapping`` that this process wrote (its copy-on-write
  pages: ``Anonymous`` in ``/proc/self/smaps``)."""
  header = f'{mapping.start:x}-{mapping.end:x} '
  with open('/proc/self/smaps') as f:
    inside = False
    for line in f:
      if line.startswith(header):
        inside = True
      elif inside and line.startswith('Anonymous:'):
        return int(line.split()[1])
  return None


class MappedFileTensor:
  r"""A tensor over a file this process maps (``tensor``), and the
  ``handle`` another process of this host maps it by (the interface of
  ``HostSharedTensor``). Make one with ``of`` or ``open``."""

  def __init__(self, tensor: torch.Tensor, handle: MappedFileHandle):
    self.tensor = tensor
    self.handle = handle

  @classmethod
  def of(cls, tensor: torch.Tensor) -> Optional['MappedFileTensor']:
    r"""``tensor`` with its handle when it lies, whole and unmodified, in a
    file this process maps; else None.

    Args:
      tensor: a CPU tensor.
    """
    if not host_sharing_available() or tensor.device.type != 'cpu':
      return None
    if not tensor.is_contiguous() or tensor.numel() == 0:
      return None
    start = tensor.data_ptr()
    mapping = _mapping_of(start, start + tensor.numel() * tensor.element_size())
    if mapping is None or _copied_kb(mapping) != 0:
      return None
    try:
      info = os.stat(mapping.path)
    except OSError:
      return None
    if (info.st_dev, info.st_ino) != (mapping.device, mapping.inode):
      return None  # the name now leads to another file
    offset = mapping.file_offset + start - mapping.start
    handle = MappedFileHandle(
      boot_id(), mapping.path, mapping.device, mapping.inode, offset, tensor.dtype,
      tuple(tensor.shape),
    )  # fmt: skip
    return cls(tensor, handle)

  @classmethod
  def open(cls, handle: MappedFileHandle) -> 'MappedFileTensor':
    r"""Maps the tensor of ``handle`` copy-on-write from its file (the file
    is never written).

    Raises:
      HostShareError: the handle is of another host, or its file is gone,
        not readable here, or not the file it names.
    """
    return cls(_map_file(handle), handle)


def _map_file(handle: MappedFileHandle) -> torch.Tensor:
  if handle.boot_id != boot_id():
    raise HostShareError(f'{handle.path} is a file of another host')
  try:
    fd = os.open(handle.path, os.O_RDONLY | os.O_CLOEXEC)
  except OSError as e:
    raise HostShareError(f'cannot open {handle.path}: {e.strerror}') from e
  try:
    info = os.fstat(fd)
    if (info.st_dev, info.st_ino) != (handle.device, handle.inode):
      raise HostShareError(f'{handle.path} is not the file of the handle')
    if info.st_size < handle.offset + handle.nbytes:
      raise HostShareError(f'{handle.path} is shorter than the tensor of the handle')
    aligned = handle.offset - handle.offset % mmap.ALLOCATIONGRANULARITY
    length = handle.offset - aligned + handle.nbytes
    mapped = mmap.mmap(fd, length, access=mmap.ACCESS_COPY, offset=aligned)
  finally:
    os.close(fd)
  count = handle.nbytes // torch.empty((), dtype=handle.dtype).element_size()
  flat = torch.frombuffer(mapped, dtype=handle.dtype, count=count, offset=handle.offset - aligned)
  return flat.view(handle.shape)
