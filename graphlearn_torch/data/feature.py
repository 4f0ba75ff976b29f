"""Feature tables: rows looked up by node (or edge) id."""

import logging
import threading
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from typing import List, Optional, Sequence, Tuple, Union

import torch

from .._ext import cuda_kernels_available, ops
from ..partition.partition_book import OffsetId2Index
from ..typing import TensorDataType
from ..utils.cuda_share import CudaIpcTensor
from ..utils.host_share import HostSharedTensor, HostTensorHandle, host_sharing_available
from ..utils.huge_pages import collapse
from ..utils.mapped_file import MappedFileHandle, MappedFileTensor
from ..utils.tensor import convert_to_tensor
from .gather_checks import GatherChecks
from .unified_tensor import UnifiedTensor

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


@dataclass(frozen=True)
class FeatureHostHandle:
  """Where a Feature's host-shared table lives (see ``Feature.host_share``).

  Args:
    table: the table's handle: of host-shared memory, or of the file it is
      read from in place.
    id2index: the id-to-row map's handle, the OffsetId2Index, or None.
  """

  table: Union[HostTensorHandle, MappedFileHandle]
  id2index: Union[None, HostTensorHandle, OffsetId2Index]


GpuPart = Tuple[CudaIpcTensor, int]
r"""A tensor another process placed on a GPU, and that GPU's index."""


@dataclass(frozen=True)
class FeatureShareHandle:
  """What another process needs to read the same Feature (``share_ipc``).

  Args:
    tables: the host-shared table's handle, or (table, id map) in torch's
      shared memory.
    split_ratio, device_group_list, device, with_gpu: as for ``Feature``.
    gpu_parts: the table's GPU parts in row order, where it is placed.
    gpu_id2index: its id-to-row map in GPU memory, where it is placed.
  """

  tables: Union[FeatureHostHandle, Tuple[torch.Tensor, Union[None, torch.Tensor, OffsetId2Index]]]
  split_ratio: float
  device_group_list: Optional[List[DeviceGroup]]
  device: Optional[int]
  with_gpu: bool
  gpu_parts: Optional[List[GpuPart]] = None
  gpu_id2index: Optional[GpuPart] = None


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
    self.with_gpu = bool(with_gpu) and cuda_kernels_available()
    if with_gpu and not self.with_gpu and split_ratio > 0:
      logger.info('no GPU with the CUDA kernels: the feature table stays in host memory')
    self.dtype = self.feature_tensor.dtype
    if not self.with_gpu:  # the CPU gather reads its rows (and map) at random
      collapse(self.feature_tensor, 'feature table')
      if isinstance(self.id2index, torch.Tensor):
        collapse(self.id2index, "feature table's id map")
    # Released gather outputs are reused: fresh pages cost more than the copy.
    self._out_pool = ops.BufferPool(OUTPUT_CACHE_BYTES)
    self._unified: Optional[UnifiedTensor] = None  # the GPU path's table, built on first use
    # another process's GPU parts and id map (share_ipc)
    self._shared_unified: Optional[List[GpuPart]] = None
    self._shared_id2index: Optional[GpuPart] = None
    self._gpu_id2index: Optional[torch.Tensor] = None
    self._placing = threading.Lock()  # a peer's request may place the table (share_on_host)
    self._host_table: Union[None, HostSharedTensor, MappedFileTensor] = None  # see host_share
    self._host_id2index: Optional[HostSharedTensor] = None
    self._row_ranks: Optional[torch.Tensor] = None  # see row_ranks
    self._row_ranks_built = False

  def __getitem__(self, ids: torch.Tensor) -> torch.Tensor:
    """The rows of ``ids``, shaped as indexing the table gives them (a row a
    scalar id, ``ids.shape`` rows of ids of more dimensions): gathered on the
    GPU (a CUDA tensor, with no host round trip for CUDA ids) with
    ``with_gpu``, else from host memory."""
    ids = convert_to_tensor(ids)
    rows = self.rows(ids)
    return rows if ids.dim() == 1 else rows.reshape(*ids.shape, *rows.shape[1:])

  def rows(self, ids: torch.Tensor, checks: Optional[GatherChecks] = None) -> torch.Tensor:
    """``self[ids]``, the GPU gather's check that every id has a row left in
    ``checks`` to be read with others' (see ``gpu_get``)."""
    if self.with_gpu:
      return self.gpu_get(ids, checks)
    return self.cpu_get(ids)

  def _check_ids(self, ids) -> torch.Tensor:
    ids = convert_to_tensor(ids)
    if not isinstance(ids, torch.Tensor):
      ids = torch.as_tensor(ids)
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
      raise TypeError(f'feature rows are indexed by integer ids, got dtype {ids.dtype}')
    return ids.to(torch.int64).reshape(-1)

  def gpu_get(self, ids: torch.Tensor, checks: Optional[GatherChecks] = None) -> torch.Tensor:
    """Gathers the rows of ``ids`` on the GPU: the hot rows from GPU memory,
    the rest from pinned host memory through UVA, in one kernel.

    Args:
      ids: the ids.
      checks: where the check that every id has a row waits, to be read
        with the other gathers' of a batch in one host sync; by default it
        is read at once.
    """
    self.lazy_init_with_ipc_handle()
    ids = self._check_ids(ids).to(self._unified.device)
    if isinstance(self.id2index, OffsetId2Index):
      return self._unified.gather(self.id2index[ids], checks=checks)
    return self._unified.gather(ids, self._gpu_id2index, checks)

  def gpu_table(self) -> Tuple[List[torch.Tensor], Union[None, torch.Tensor, OffsetId2Index]]:
    """What the GPU gather reads, placed first: the table's parts in row
    order (in GPU memory, and host memory the GPU reads) and the row of each
    id (None: the id itself)."""
    self.lazy_init_with_ipc_handle()
    id2index = self.id2index if isinstance(self.id2index, OffsetId2Index) else self._gpu_id2index
    return list(self._unified.parts), id2index

  def set_device(self, device: int) -> None:
    """Looks rows up on GPU ``device`` from now on (the GPU path only); the
    table is placed for it on first use."""
    if self.with_gpu and int(device) != self.device:
      self.device = int(device)
      # another process's GPU parts stay: read in place, or over peer access
      self._unified = self._gpu_id2index = None

  def device_group(self, device: int) -> List[int]:
    """The GPUs that share the hot rows with ``device``: its group's (the
    hot rows are split across them), or itself alone."""
    for group in self.device_group_list or []:
      indices = [torch.device(d).index if not isinstance(d, int) else d for d in group.device_list]
      if device in indices:
        return indices
    return [device]

  def _build_unified(self) -> UnifiedTensor:
    device = self.gpu_index()
    group = self.device_group(device)
    rows = self.feature_tensor.size(0)
    hot = int(rows * self.split_ratio)
    table = UnifiedTensor(device, self.dtype)
    bounds = torch.linspace(0, hot, len(group) + 1).long().tolist()
    for gpu, lo, hi in zip(group, bounds, bounds[1:]):
      if hi > lo:
        table.append_shared_tensor(self.feature_tensor[lo:hi].to(torch.device('cuda', gpu)))
    if hot < rows:
      table.append_cpu_tensor(self.feature_tensor[hot:])
    logger.info(
      'feature table %s: %d hot rows on GPUs %s, %d rows in host memory read through UVA',
      tuple(self.shape), hot, group, rows - hot,
    )  # fmt: skip
    return table

  def _host_ids(self, ids) -> tuple:
    """``(ids, id2index)`` for the host gather: the ids of an offset table
    already turned into rows."""
    ids = self._check_ids(ids).cpu()
    if isinstance(self.id2index, OffsetId2Index):
      return self.id2index[ids], None
    return ids, self.id2index

  def cpu_get(self, ids: torch.Tensor) -> torch.Tensor:
    """Gathers the rows of ``ids`` (int64) from host memory; through the
    row ranks where the table has them (a partition's own rows, as a peer's
    request reads them): the partitioned gather with every id in this
    table."""
    if self.row_ranks() is not None:
      ids = self._check_ids(ids).cpu()
      in_this_table = torch.zeros(ids.numel(), dtype=torch.uint8)
      return self.cpu_get_partitioned([self], in_this_table, ids)
    ids, id2index = self._host_ids(ids)
    return ops.gather_rows(self.feature_tensor, ids, id2index, self._out_pool)

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

  def row_ranks(self) -> Optional[torch.Tensor]:
    """The id-to-row map in 16 bytes per 64 ids (``ops.row_ranks``), built on
    the first call, when the table's rows hold their ids in ascending order
    (a partition's own rows); None otherwise, or without a map tensor. The
    partitioned gather reads it instead of ``id2index``: it stays in cache
    where the int64 map would not."""
    if not self._row_ranks_built:
      if isinstance(self.id2index, torch.Tensor) and self.id2index.device.type == 'cpu':
        self._row_ranks = ops.row_ranks(self.id2index)
      self._row_ranks_built = True
    return self._row_ranks

  def cpu_get_partitioned(
    self,
    features: Sequence[Optional['Feature']],
    parts: torch.Tensor,
    ids: torch.Tensor,
    out: Optional[torch.Tensor] = None,
  ) -> torch.Tensor:
    """Gathers the rows of ``ids`` from host memory, each from the table of
    its partition, in one call: row ``i`` comes from ``features[parts[i]]``
    (this one among them; its buffer pool holds the output). The rows of ids
    whose partition has no Feature (``None``) are left for the caller to
    fill.

    Args:
      features: the Feature of each partition held on this host, or None.
      parts: the partition of each id (an integer tensor).
      ids: the ids (int64).
      out: where to write the rows (a contiguous CPU ``[len(ids), dim]``
        tensor of the table's dtype; default: a buffer of the pool).
    """
    ids = self._check_ids(ids).cpu()
    tables, maps, ranks, offsets = [], [], [], []
    for feature in features:
      id2index = feature.id2index if feature is not None else None
      tables.append(feature.feature_tensor if feature is not None else None)
      ranks.append(feature.row_ranks() if feature is not None else None)
      maps.append(None if isinstance(id2index, OffsetId2Index) else id2index)
      offsets.append(id2index.offset if isinstance(id2index, OffsetId2Index) else 0)
    return ops.gather_partitioned_rows(
      tables, maps, ranks, offsets, parts.view(-1).cpu(), ids, self._out_pool, out
    )

  def host_share(self) -> FeatureHostHandle:
    """Makes the table (and its id-to-row map) mappable by any process of
    this host, once; returns the handle ``from_host_handle`` maps it by. A
    table read in place from a file, unmodified, is handed out as that file
    (the processes then read the same page cache, nothing is copied) unless
    the GPU reads it: the GPU reads host rows from shared memory it
    registers. Any other table moves into host-shared memory
    (``utils.host_share``): a copy, its old memory freed when nothing else
    holds it.

    Raises:
      HostShareError: the platform cannot share memory that way.
    """
    if self._host_table is None:
      in_file = None if self.with_gpu else MappedFileTensor.of(self.feature_tensor)
      table = in_file or HostSharedTensor.copy_of(self.feature_tensor, 'feature table')
      if isinstance(self.id2index, torch.Tensor):
        self._host_id2index = HostSharedTensor.copy_of(self.id2index, "feature table's id map")
        self.id2index = self._host_id2index.tensor
      self._host_table, self.feature_tensor = table, table.tensor
      logger.debug(
        'feature table %s shared on this host (%s)', tuple(self.shape),
        'as its file' if in_file else 'moved to host-shared memory',
      )  # fmt: skip
    id2index = self._host_id2index.handle if self._host_id2index is not None else self.id2index
    return FeatureHostHandle(self._host_table.handle, id2index)

  @classmethod
  def from_host_handle(
    cls,
    handle: FeatureHostHandle,
    split_ratio: float = 0.0,
    device_group_list: Optional[List[DeviceGroup]] = None,
    device: Optional[int] = None,
    with_gpu: Optional[bool] = False,
  ) -> 'Feature':
    """The Feature over a table that another process of this host shared
    (``host_share``), without a copy: writes to it are seen by every process.

    Args:
      handle: the table's handle.
      split_ratio, device_group_list, device, with_gpu: as for ``Feature``.

    Raises:
      HostShareError: the table cannot be mapped here (another host, its
        holder gone).
    """
    if isinstance(handle.table, MappedFileHandle):
      table = MappedFileTensor.open(handle.table)
    else:
      table = HostSharedTensor.open(handle.table)
    id2index = handle.id2index
    host_id2index = None
    if isinstance(id2index, HostTensorHandle):
      host_id2index = HostSharedTensor.open(id2index)
      id2index = host_id2index.tensor
    feature = cls(
      table.tensor, id2index, split_ratio, device_group_list, device, with_gpu,
      dtype=table.tensor.dtype,
    )  # fmt: skip
    feature._host_table, feature._host_id2index = table, host_id2index
    return feature

  def gpu_index(self) -> int:
    """The GPU the table is (or would be) placed for: ``device``, else the
    current one (GPU path only)."""
    return self.device if self.device is not None else torch.cuda.current_device()

  def share_ipc(self, gpu_parts: bool = True) -> FeatureShareHandle:
    """Moves the table to shared memory; returns a picklable handle: the
    host-shared table's where the platform has them (so that the receiving
    process can share it on with its peers of this host), else torch's
    shared memory. A table placed for the GPU hands over its GPU parts and
    id map too, as the CUDA IPC handles of the process that placed them
    (``CudaIpcTensor``), this one or the one it came from: every process it
    reaches reads the same hot rows and map (unless ``gpu_parts`` is False:
    for a process that does not read them, which then opens nothing)."""
    if host_sharing_available():
      tables = self.host_share()
    else:
      self.feature_tensor.share_memory_()
      if isinstance(self.id2index, torch.Tensor):
        self.id2index.share_memory_()
      tables = (self.feature_tensor, self.id2index)
    # the receiver reads the rows after them from the table it maps
    parts = id2index = None
    if gpu_parts:
      parts, id2index = self._shared_unified, self._shared_id2index
      if parts is None and self._unified is not None:
        parts = [(CudaIpcTensor(part), gpu) for part, gpu in self._unified.gpu_parts()]
      if id2index is None and self._gpu_id2index is not None:
        id2index = (CudaIpcTensor(self._gpu_id2index), self._gpu_id2index.device.index)
    return FeatureShareHandle(
      tables, self.split_ratio, self.device_group_list, self.device, self.with_gpu, parts,
      id2index,
    )  # fmt: skip

  @classmethod
  def from_ipc_handle(cls, ipc_handle: FeatureShareHandle) -> 'Feature':
    """The Feature another process shared (``share_ipc``'s handle; GLT's
    parameter name)."""
    handle = ipc_handle
    placement = (handle.split_ratio, handle.device_group_list, handle.device, handle.with_gpu)
    if isinstance(handle.tables, FeatureHostHandle):
      feature = cls.from_host_handle(handle.tables, *placement)
    else:
      table, id2index = handle.tables
      feature = cls(table, id2index, *placement, dtype=table.dtype)
    feature._shared_unified = handle.gpu_parts
    feature._shared_id2index = handle.gpu_id2index
    return feature

  def share_on_host(self, gpu: Optional[int]) -> FeatureShareHandle:
    """``share_ipc``'s handle for another process of this host that gathers
    on GPU ``gpu`` (None: on none): a table for that GPU is placed first
    (``place_on_gpu``), so that the process reads its GPU parts and id map
    by CUDA IPC rather than placing copies of its own; a table for another
    GPU (or none) hands over none."""
    for_it = gpu is not None and self.with_gpu and self.gpu_index() == gpu
    if for_it:
      self.place_on_gpu(gpu)
    return self.share_ipc(gpu_parts=for_it)

  def place_on_gpu(self, device: int) -> None:
    """Places the table for GPU ``device`` now, where it is for that GPU:
    its host rows moved to host-shared memory first (registered where every
    process maps them, not pinned again), so that the processes it is
    handed to next read its GPU parts by CUDA IPC (``share_ipc``)."""
    if not self.with_gpu:
      return
    if self.gpu_index() != device:
      return
    if host_sharing_available():
      self.host_share()
    self.lazy_init_with_ipc_handle()

  def lazy_init_with_ipc_handle(self) -> None:
    """Places the table for GPU lookups (once; nothing to do on the CPU
    path): the hot rows in the GPU memory of this device's group, the rest
    pinned for UVA, or the GPU parts another process shared."""
    if not self.with_gpu or self._unified is not None:
      return
    with self._placing:
      if self._unified is not None:
        return  # placed by another thread meanwhile
      if self._shared_unified is not None:
        device = self.gpu_index()
        parts = [(part.tensor, gpu) for part, gpu in self._shared_unified]
        hot = sum(part.size(0) for part, _ in parts)
        cold = self.feature_tensor[hot:] if hot < self.feature_tensor.size(0) else None
        unified = UnifiedTensor.new_from_ipc((parts, cold), device, self.dtype)
      else:
        unified = self._build_unified()
      if isinstance(self.id2index, torch.Tensor):
        self._gpu_id2index = self._id2index_on(unified.device)
      self._unified = unified

  def _id2index_on(self, device: torch.device) -> torch.Tensor:
    """The id map on GPU ``device``: the one another process placed there
    (read by CUDA IPC), else a copy of this table's."""
    shared = self._shared_id2index
    if shared is not None and shared[1] == device.index:
      return shared[0].tensor
    return self.id2index.to(device)

  def __repr__(self) -> str:
    return f'Feature(shape={tuple(self.shape)}, dtype={self.dtype})'


def rebuild_feature(ipc_handle) -> Feature:
  """Rebuilds a Feature in another process from its ``share_ipc`` handle."""
  return Feature.from_ipc_handle(ipc_handle)


def reduce_feature(feature: Feature):
  """Pickles a Feature for multiprocessing as a shared-memory handle (no copy)."""
  return rebuild_feature, (feature.share_ipc(),)


ForkingPickler.register(Feature, reduce_feature)
