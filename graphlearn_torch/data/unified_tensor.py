"""UnifiedTensor: one logical table whose rows live in several memories.

The first rows (the hottest, when the table is sorted hottest-first) live in
GPU memory, possibly split across the GPUs of a device group that read each
other's memory (peer access); the rest stay in pinned host memory that the
GPU reads in place through UVA. One kernel (``torch.ops.glt.unified_gather``)
takes global row ids and writes one output, whichever memory each row is in.

Without the CUDA kernels (no GPU, or a CPU build) the parts are host tensors
and the gather runs on the CPU, so the same code works everywhere.
"""

import logging
from typing import List, Optional, Sequence, Tuple

import torch

from .._ext import cuda_kernels_available, ops
from .gather_checks import GatherChecks

logger = logging.getLogger(__name__)

HOST = -1  # the device index of a part in host memory
# Host memory of this process's own from this size up is registered with CUDA
# where it lies rather than copied into pinned memory: an allocation this
# large has pages of its own (glibc maps one of 32 MiB or more by itself), so
# no other registration overlaps them, and a pinned copy would cost as much
# host memory again (more: pinned blocks round up to a power of two).
REGISTER_IN_PLACE_BYTES = 64 << 20


# The parts one gather reads at most (kMaxParts of csrc/kernels/unified_gather.h).
MAX_PARTS = 16


def host_view(host: torch.Tensor, device: int) -> torch.Tensor:
  r"""A CUDA view of the host tensor ``host`` that GPU ``device``'s kernels
  read in place (UVA), keeping ``host`` alive: memory the host's processes
  share (``share_memory_``, host-shared partitions) and tables of at least
  ``REGISTER_IN_PLACE_BYTES`` registered where they lie, so the processes
  of a host hold one copy and a process no second one of its own; pinned
  memory as it is; other memory, and memory CUDA cannot register (a
  read-only file mapping), pinned into a copy.

  Args:
    host: a CPU tensor.
    device: the GPU that reads it.
  """
  host = host.contiguous()
  nbytes = host.untyped_storage().nbytes()
  # First: once registered here, a tensor reads as pinned, and only
  # registered_view keeps the registration for as long as its views live.
  if host.is_shared() or nbytes >= REGISTER_IN_PLACE_BYTES:
    try:
      return ops.registered_view(host, device)
    except RuntimeError as error:
      logger.warning(
        'CUDA cannot read %.1f MB of host memory where it lies (%s): copying it into pinned '
        'memory', nbytes / 2**20, error,
      )  # fmt: skip
  if host.is_pinned():
    return ops.uva_view(host, device)
  return ops.uva_view(host.pin_memory(), device)


class UnifiedTensor:
  """A table made of parts stacked row-wise, each in GPU or host memory.

  Args:
    current_device: the GPU whose kernels read the table (and where lookups
      land); ignored without the CUDA kernels.
    dtype: the table's dtype.
  """

  def __init__(self, current_device: Optional[int], dtype: torch.dtype = torch.float32):
    self.on_gpu = cuda_kernels_available()
    self.current_device = (
      (current_device if current_device is not None else torch.cuda.current_device())
      if self.on_gpu
      else None
    )
    self.dtype = dtype
    self.parts: List[torch.Tensor] = []  # what the gather kernel reads
    self.part_devices: List[int] = []  # HOST for host memory
    self._host_parts: List[torch.Tensor] = []  # the host tensors behind UVA views

  @property
  def _read_device(self) -> torch.device:
    return torch.device('cuda', self.current_device) if self.on_gpu else torch.device('cpu')

  def _check_part(self, part: torch.Tensor) -> torch.Tensor:
    if part.dim() == 1:
      part = part.unsqueeze(1)
    if part.dim() != 2:
      raise ValueError(f'a UnifiedTensor part must be 2-D, got shape {tuple(part.shape)}')
    if self.parts and part.size(1) != self.parts[0].size(1):
      raise ValueError(
        f'parts of a UnifiedTensor need one width: {part.size(1)} vs {self.parts[0].size(1)}'
      )
    if len(self.parts) >= MAX_PARTS:
      raise ValueError(f'a UnifiedTensor holds at most {MAX_PARTS} parts')
    return part.to(self.dtype).contiguous()

  def append_shared_tensor(self, shared_tensor: torch.Tensor) -> None:
    """Appends a part that already lives in GPU memory (this process's, or
    another's shared through CUDA IPC); kernels on ``current_device`` read it
    in place, over peer access when it is another GPU's."""
    part = self._check_part(shared_tensor)
    if not self.on_gpu:
      self._append(part.cpu(), HOST)
      return
    if part.device.type != 'cuda':
      raise ValueError(f'a shared part must be in GPU memory, got one on {part.device}')
    if part.device.index != self.current_device and not ops.enable_peer_access(
      self.current_device, part.device.index
    ):
      logger.warning(
        'GPU %d cannot read GPU %d: copying its part of the table', self.current_device,
        part.device.index,
      )  # fmt: skip
      part = part.to(self._read_device)
    self._append(part, part.device.index)

  def append_cpu_tensor(self, cpu_tensor: torch.Tensor) -> None:
    """Appends a part in host memory, read by the GPU in place through UVA
    (``host_view``: shared memory and large tables registered where they
    lie, other memory pinned); a plain host part without the CUDA kernels."""
    part = self._check_part(cpu_tensor.cpu())
    if not self.on_gpu:
      self._append(part, HOST)
      return
    self._host_parts.append(part)
    self._append(host_view(part, self.current_device), HOST)

  def _append(self, part: torch.Tensor, device: int) -> None:
    self.parts.append(part)
    self.part_devices.append(device)

  def init_from(self, tensors: Sequence[torch.Tensor], tensor_devices: Sequence[int]) -> None:
    """Builds the table from ``tensors`` stacked row-wise, each placed on its
    entry of ``tensor_devices``: a GPU index, or -1 for host memory."""
    if len(tensors) != len(tensor_devices):
      raise ValueError(f'{len(tensors)} tensors for {len(tensor_devices)} devices')
    for tensor, device in zip(tensors, tensor_devices):
      if device is None or int(device) < 0 or not self.on_gpu:
        self.append_cpu_tensor(tensor)
      else:
        self.append_shared_tensor(tensor.to(torch.device('cuda', int(device))))

  def __getitem__(self, ids: torch.Tensor) -> torch.Tensor:
    return self.gather(ids)

  def gather(
    self,
    ids: torch.Tensor,
    id2index: Optional[torch.Tensor] = None,
    checks: Optional[GatherChecks] = None,
  ) -> torch.Tensor:
    """The rows of ``ids`` (through ``id2index`` when given), on the reading
    device.

    Args:
      ids: the ids.
      id2index: the row of each id.
      checks: where the check that every id has a row waits to be read with
        others' (``GatherChecks.raise_first``); by default the gather reads
        it back at once.
    """
    if not self.parts:
      raise ValueError('the UnifiedTensor is empty: append parts first')
    device = self._read_device
    ids = torch.as_tensor(ids).to(device=device, dtype=torch.int64).reshape(-1)
    if id2index is not None:
      id2index = id2index.to(device)
    parts = list(self.parts)
    if checks is None:
      return torch.ops.glt.unified_gather(parts, ids, id2index)
    flag = checks.flag(device, lambda: torch.ops.glt.unified_gather(parts, ids, id2index))
    return torch.ops.glt.unified_gather(parts, ids, id2index, flag)

  @property
  def shape(self) -> torch.Size:
    rows = sum(p.size(0) for p in self.parts)
    return torch.Size([rows, self.parts[0].size(1) if self.parts else 0])

  @property
  def device(self) -> torch.device:
    """Where lookups land."""
    return self._read_device

  def numel(self) -> int:
    return self.shape[0] * self.shape[1]

  def size(self, dim: int) -> int:
    return self.shape[dim]

  def stride(self, dim: int) -> int:
    return (self.shape[1], 1)[dim]

  def gpu_parts(self) -> List[Tuple[torch.Tensor, int]]:
    """``[(part, device)]`` of the parts in GPU memory, in row order (they
    come before the host part)."""
    return [(p, d) for p, d in zip(self.parts, self.part_devices) if d != HOST]

  def share_ipc(self) -> Tuple[List[Tuple[torch.Tensor, int]], Optional[torch.Tensor]]:
    """``([(GPU part, device)], host rows)``: what another process needs to
    read the same table (GPU parts travel by CUDA IPC, host rows as shared
    memory)."""
    gpu_parts = self.gpu_parts()
    host = [h for h in self._host_parts] or [
      p for p, d in zip(self.parts, self.part_devices) if d == HOST
    ]
    if len(host) == 1 and host[0].is_shared():
      host_rows = host[0]  # the same pages: the other process registers them too
    else:
      host_rows = torch.cat(host).share_memory_() if host else None
    return gpu_parts, host_rows

  def from_ipc_handle(self, cuda_ipc_list, cpu_part: Optional[torch.Tensor]) -> None:
    """Fills this table from another process's ``share_ipc``."""
    for part, _ in cuda_ipc_list:
      self.append_shared_tensor(part)
    if cpu_part is not None:
      self.append_cpu_tensor(cpu_part)

  @classmethod
  def new_from_ipc(
    cls, ipc_handles, current_device: Optional[int], dtype: torch.dtype = torch.float32
  ) -> 'UnifiedTensor':
    """A table over another process's parts (see ``share_ipc``)."""
    table = cls(current_device, dtype)
    table.from_ipc_handle(*ipc_handles)
    return table

  def __repr__(self) -> str:
    where = ', '.join('host' if d == HOST else f'cuda:{d}' for d in self.part_devices)
    return f'UnifiedTensor(shape={tuple(self.shape)}, parts=[{where}], reads on {self.device})'
