"""Feature tables: rows looked up by node (or edge) id."""

import logging
from multiprocessing.reduction import ForkingPickler
from typing import List, Optional, Sequence, Union

import torch

from .._ext import ops
from ..partition.partition_book import OffsetId2Index
from ..typing import TensorDataType
from ..utils.tensor import convert_to_tensor

logger = logging.getLogger(__name__)

# How many bytes of released gather outputs a Feature keeps for reuse.
OUTPUT_CACHE_BYTES = 1 << 30


class DeviceGroup:
  """GPUs that share one copy of the hot feature rows.

  Args:
    group_id: the group's index.
    device_list: the GPUs of the group.
  """

  def __init__(self, group_id: int, device_list: List[torch.device]):
    self.group_id = group_id
    self.device_list = list(device_list)

  @property
  def size(self) -> int:
    return len(self.device_list)


class Feature:
  """A table of feature rows with an optional id-to-row map.

  Args:
    feature_tensor: ``[num_rows, dim]`` (a 1-D tensor is one column).
    id2index: ``id2index[id]`` is the row of ``id``; rows are ids when None;
      an OffsetId2Index for a table of the contiguous ids ``offset + row``.
    split_ratio: the share of rows to keep in GPU memory (GPU path only).
    device_group_list: GPU groups that share hot rows (GPU path only).
    device: the GPU index (GPU path only).
    with_gpu: use the GPU when there is one; on a machine without CUDA the
      table stays in host memory.
    dtype: the dtype of the table.
  """

  def __init__(
    self,
    feature_tensor: TensorDataType,
    id2index: Optional[Union[torch.Tensor, Sequence]] = None,
    split_ratio: float = 0.0,
    device_group_list: Optional[List[DeviceGroup]] = None,
    device: Optional[int] = None,
    with_gpu: Optional[bool] = True,
    dtype: torch.dtype = torch.float32,
  ):
    table = convert_to_tensor(feature_tensor)
    if table.dim() == 1:
      table = table.unsqueeze(1)
    if table.dim() != 2:
      raise ValueError(f'a feature table must be 2-D, got shape {tuple(table.shape)}')
    if dtype is not None and table.dtype != dtype:
      table = table.to(dtype)
    self.feature_tensor = table.contiguous()
    if id2index is None or isinstance(id2index, OffsetId2Index):
      self.id2index = id2index
    else:
      self.id2index = convert_to_tensor(id2index, torch.int64)
    if not 0.0 <= float(split_ratio) <= 1.0:
      raise ValueError(f'split_ratio must be in [0, 1], got {split_ratio}')
    self.split_ratio = float(split_ratio)
    self.device_group_list = device_group_list
    self.device = device
    self.with_gpu = bool(with_gpu) and torch.cuda.is_available()
    if with_gpu and not self.with_gpu and split_ratio > 0:
      logger.info('no CUDA device: the feature table stays in host memory')
    self.dtype = self.feature_tensor.dtype
    # Released gather outputs are reused: fresh pages cost more than the copy.
    self._out_pool = ops.BufferPool(OUTPUT_CACHE_BYTES)

  def __getitem__(self, ids: torch.Tensor) -> torch.Tensor:
    return self.cpu_get(ids)

  def cpu_get(self, ids: torch.Tensor) -> torch.Tensor:
    """Gathers the rows of ``ids`` (int64) from host memory."""
    return self.cpu_get_at(ids)

  def cpu_get_at(
    self,
    ids: torch.Tensor,
    positions: Optional[torch.Tensor] = None,
    num_rows: Optional[int] = None,
  ) -> torch.Tensor:
    """Gathers the rows of ``ids`` from host memory; with ``positions``, into
    a ``[num_rows, dim]`` tensor whose row ``positions[i]`` gets ``ids[i]``'s
    row (the other rows are left for the caller to fill).

    Args:
      ids: the ids (int64).
      positions: where each row goes in the output.
      num_rows: the output's rows (with ``positions``).
    """
    ids = convert_to_tensor(ids)
    if not isinstance(ids, torch.Tensor):
      ids = torch.as_tensor(ids)
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
      raise TypeError(f'feature rows are indexed by integer ids, got dtype {ids.dtype}')
    ids = ids.to(torch.int64).reshape(-1).cpu()
    id2index = self.id2index
    if isinstance(id2index, OffsetId2Index):
      ids, id2index = id2index[ids], None
    if positions is None:
      return ops.gather_rows(self.feature_tensor, ids, id2index, self._out_pool)
    return ops.gather_rows(
      self.feature_tensor, ids, id2index, self._out_pool, positions, int(num_rows)
    )

  @property
  def num_ids(self) -> int:
    """How many ids the table can answer for."""
    if isinstance(self.id2index, OffsetId2Index):
      return self.id2index.offset + self.feature_tensor.size(0)
    if self.id2index is not None:
      return self.id2index.numel()
    return self.feature_tensor.size(0)

  @property
  def shape(self) -> torch.Size:
    return self.feature_tensor.shape

  def size(self, dim: int) -> int:
    return self.feature_tensor.size(dim)

  def share_ipc(self):
    """Moves the table to shared memory; returns a picklable handle."""
    self.feature_tensor.share_memory_()
    if isinstance(self.id2index, torch.Tensor):
      self.id2index.share_memory_()
    return (
      self.feature_tensor,
      self.id2index,
      self.split_ratio,
      self.device_group_list,
      self.device,
      self.with_gpu,
    )

  @classmethod
  def from_ipc_handle(cls, ipc_handle) -> 'Feature':
    table, id2index, split_ratio, groups, device, with_gpu = ipc_handle
    return cls(table, id2index, split_ratio, groups, device, with_gpu, dtype=table.dtype)

  def lazy_init_with_ipc_handle(self) -> None:
    """Places the table for lookups (nothing to do on the CPU)."""

  def __repr__(self) -> str:
    return f'Feature(shape={tuple(self.shape)}, dtype={self.dtype})'


def rebuild_feature(ipc_handle) -> Feature:
  """Rebuilds a Feature in another process from its ``share_ipc`` handle."""
  return Feature.from_ipc_handle(ipc_handle)


def reduce_feature(feature: Feature):
  """Pickles a Feature for multiprocessing as a shared-memory handle (no copy)."""
  return rebuild_feature, (feature.share_ipc(),)


ForkingPickler.register(Feature, reduce_feature)
