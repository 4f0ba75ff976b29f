"""Streaming writes and memory-mapped reads of NumPy ``.npy`` files.

A partition's files are written row chunk by row chunk (never whole in
memory) and read back with ``mmap`` (no start-up read, no pickle). Every file
we write has a fixed 128-byte header, so its shape can be rewritten in place
when rows are appended.
"""

import hashlib
import os
import warnings
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import torch

_MAGIC = b'\x93NUMPY\x01\x00'
_HEADER_BYTES = 128  # magic (8) + length (2) + dict, padded; a multiple of 64
_HASH_BLOCK = 1 << 24


class PartitionFileError(ValueError):
  """A partition file is missing, truncated, corrupt or not what META says."""


def as_tensor(data) -> Optional[torch.Tensor]:
  """A tensor view of tensor-like input, without copying NumPy arrays (read-only
  memory maps included: the partitioner never writes to its inputs)."""
  if data is None or isinstance(data, torch.Tensor):
    return data
  if isinstance(data, np.ndarray):
    with warnings.catch_warnings():
      warnings.simplefilter('ignore')
      return torch.from_numpy(data)
  return torch.as_tensor(data)


def numpy_dtype(dtype) -> np.dtype:
  """The NumPy dtype of a torch or NumPy dtype; clear error when there is none."""
  if isinstance(dtype, torch.dtype):
    try:
      return torch.empty(0, dtype=dtype).numpy().dtype
    except TypeError as e:
      raise ValueError(f'{dtype} has no NumPy equivalent and cannot be stored in .npy') from e
  return np.dtype(dtype)


def as_numpy(t) -> np.ndarray:
  """A NumPy view of a CPU tensor or array (no copy when contiguous)."""
  if isinstance(t, torch.Tensor):
    return t.detach().cpu().contiguous().numpy()
  return np.ascontiguousarray(t)


def _header(dtype: np.dtype, shape: Sequence[int]) -> bytes:
  fields = {
    'descr': np.lib.format.dtype_to_descr(dtype),
    'fortran_order': False,
    'shape': tuple(int(s) for s in shape),
  }
  text = repr(fields).encode('latin1')
  pad = _HEADER_BYTES - len(_MAGIC) - 2 - len(text) - 1
  if pad < 0:
    raise ValueError(f'shape {tuple(shape)} is too long for a .npy header')
  text += b' ' * pad + b'\n'
  return _MAGIC + (len(text)).to_bytes(2, 'little') + text


class NpyWriter:
  """Writes one ``.npy`` file of a known shape sequentially, row chunk by row
  chunk, hashing the bytes as they go (no second read for ``sha256``).

  Args:
    path: the file to write (its directory is created).
    shape: the final shape; ``write`` calls must add up to ``shape[0]`` rows.
    dtype: a NumPy or torch dtype.
  """

  def __init__(self, path: str, shape: Sequence[int], dtype):
    self.path = path
    self.shape = tuple(int(s) for s in shape)
    self.dtype = numpy_dtype(dtype)
    self._rows = 0
    self._hash = hashlib.sha256()
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    self._file = open(path, 'wb')  # noqa: SIM115 (closed in close())
    self._put(_header(self.dtype, self.shape))

  def _put(self, data) -> None:
    self._file.write(data)
    self._hash.update(data)

  def write(self, chunk) -> None:
    """Appends rows (a tensor or array whose trailing shape matches)."""
    arr = as_numpy(chunk)
    if arr.dtype != self.dtype:
      arr = arr.astype(self.dtype)
    if tuple(arr.shape[1:]) != self.shape[1:]:
      raise ValueError(f'{self.path}: rows of shape {arr.shape[1:]}, expected {self.shape[1:]}')
    self._rows += arr.shape[0] if arr.ndim else 1
    if self._rows > self.shape[0]:
      raise ValueError(f'{self.path}: more than the {self.shape[0]} rows declared')
    self._put(memoryview(arr).cast('B'))

  def close(self) -> Dict:
    """Finishes the file; returns its META record (shape, dtype, sha256)."""
    self._file.close()
    if self._rows != self.shape[0]:
      raise ValueError(f'{self.path}: {self._rows} rows written, {self.shape[0]} declared')
    return {'shape': list(self.shape), 'dtype': self.dtype.str, 'sha256': self._hash.hexdigest()}

  def abort(self) -> None:
    """Closes the file after a failure and removes it."""
    self._file.close()
    if os.path.exists(self.path):
      os.remove(self.path)

  def __enter__(self) -> 'NpyWriter':
    return self

  def __exit__(self, *exc) -> None:
    if exc[0] is None:
      self.record = self.close()
    else:
      self.abort()


def write_npy(path: str, data, chunk_rows: int = 1 << 20) -> Dict:
  """Writes a whole tensor or array to ``path``; returns its META record."""
  arr = as_numpy(data) if isinstance(data, torch.Tensor) else data
  shape = tuple(arr.shape)
  with NpyWriter(path, shape, arr.dtype) as w:
    if not shape:
      w.write(np.asarray(arr).reshape(()))
    for start in range(0, shape[0] if shape else 0, chunk_rows):
      w.write(arr[start : start + chunk_rows])
  return w.record


def append_npy(path: str, data) -> None:
  """Appends rows to a ``.npy`` file (creating it), rewriting its shape."""
  arr = as_numpy(data)
  if not os.path.exists(path):
    write_npy(path, arr)
    return
  dtype, shape, offset = read_header(path)
  if offset != _HEADER_BYTES:
    raise PartitionFileError(f'{path}: not written by graphlearn_torch, cannot append to it')
  if arr.dtype != dtype or tuple(arr.shape[1:]) != tuple(shape[1:]):
    raise ValueError(
      f'{path}: cannot append rows of {arr.dtype} {arr.shape[1:]} to {dtype} {shape[1:]}'
    )
  with open(path, 'r+b') as f:
    f.seek(0, os.SEEK_END)
    f.write(memoryview(np.ascontiguousarray(arr)).cast('B'))
    f.seek(0)
    f.write(_header(dtype, (shape[0] + arr.shape[0],) + tuple(shape[1:])))


def read_header(path: str) -> Tuple[np.dtype, Tuple[int, ...], int]:
  """``(dtype, shape, data_offset)`` of a ``.npy`` file, without reading data."""
  try:
    with open(path, 'rb') as f:
      version = np.lib.format.read_magic(f)
      if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
      elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
      else:
        raise ValueError(f'unsupported .npy version {version}')
      offset = f.tell()
  except FileNotFoundError:
    raise
  except (ValueError, SyntaxError, OSError) as e:
    raise PartitionFileError(f'{path} is not a valid .npy file: {e}') from e
  if fortran:
    raise PartitionFileError(f'{path}: Fortran-ordered arrays are not supported')
  if dtype.hasobject:
    raise PartitionFileError(f'{path} holds Python objects (pickle); refusing to load it')
  return dtype, tuple(shape), offset


def sha256_file(path: str) -> str:
  h = hashlib.sha256()
  with open(path, 'rb') as f:
    while block := f.read(_HASH_BLOCK):
      h.update(block)
  return h.hexdigest()


def load_npy(path: str, record: Optional[Dict] = None, verify: bool = False) -> torch.Tensor:
  """Memory-maps a ``.npy`` file as a CPU tensor (copy-on-write: the file is
  never modified and pages are read only when touched).

  Args:
    path: the file.
    record: its META record (``shape``, ``dtype``, ``sha256``) to check against.
    verify: also check the ``sha256`` (reads the whole file).
  """
  if not os.path.exists(path):
    raise FileNotFoundError(path)
  dtype, shape, offset = read_header(path)
  expected = offset + dtype.itemsize * int(np.prod(shape, dtype=np.int64))
  size = os.path.getsize(path)
  if size != expected:
    raise PartitionFileError(
      f'{path} is truncated or corrupt: {size} bytes, its header promises {expected}'
    )
  if record is not None:
    if list(shape) != list(record['shape']) or dtype.str != np.dtype(record['dtype']).str:
      raise PartitionFileError(
        f'{path} holds {dtype.str} {list(shape)} but META.json records '
        f'{record["dtype"]} {record["shape"]}'
      )
    if verify and sha256_file(path) != record['sha256']:
      raise PartitionFileError(f'{path} is corrupt: its sha256 differs from META.json')
  if 0 in shape:
    return torch.from_numpy(np.empty(shape, dtype=dtype))
  arr = np.memmap(path, dtype=dtype, mode='c', offset=offset, shape=shape)
  with warnings.catch_warnings():
    warnings.simplefilter('ignore')
    return torch.from_numpy(arr)
