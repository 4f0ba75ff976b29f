"""CUDA tensors that every process they reach can hand on.

torch pickles a CUDA tensor for another process as a CUDA IPC handle of
its memory, which only the process that allocated the memory can make: a
process that received a tensor cannot send it on. A launcher that places a
partition on a GPU for the trainers it starts there, each of which starts
sampling processes on that GPU, would leave each trainer to place a copy of
its own for them. ``CudaIpcTensor`` travels as the handle of the process
that allocated it, whichever process pickles it, so every process of the
chain reads the one copy.

A received tensor is opened on first use, not when it arrives: a process
handed GPU parts it never reads (one that samples on the CPU) opens no
handle and makes no CUDA context for them.

As with torch's CUDA tensors, the allocating process must hold the tensor
for as long as any process reads it.
"""

from typing import Any, Callable, Optional, Tuple

import torch
from torch.multiprocessing import reductions

Origin = Tuple[Callable[..., torch.Tensor], Tuple[Any, ...]]
r"""How the allocating process pickled a tensor: torch's rebuild function and
its arguments (the IPC handle among them)."""


class CudaIpcTensor:
  r"""A CUDA tensor that pickles as the CUDA IPC handle of the process that
  allocated it.

  Args:
    tensor: the tensor (in GPU memory); None for one received, opened from
      ``origin`` on first use.
    origin: how its allocating process pickled it (None: this process
      allocated it, and pickles it anew each time, as torch does).
  """

  def __init__(self, tensor: Optional[torch.Tensor], origin: Optional[Origin] = None):
    if tensor is None and origin is None:
      raise ValueError('a CudaIpcTensor needs its tensor or the origin to open it from')
    self._tensor = tensor
    self.origin = origin

  @property
  def tensor(self) -> torch.Tensor:
    r"""The tensor, opened from its origin on the first call where received."""
    if self._tensor is None:
      rebuild, args = self.origin
      self._tensor = rebuild(*args)
    return self._tensor

  @property
  def opened(self) -> bool:
    r"""Whether this process holds the tensor (allocated or opened here)."""
    return self._tensor is not None

  def __reduce__(self):
    origin = self.origin if self.origin is not None else reductions.reduce_tensor(self._tensor)
    return open_cuda_ipc, (origin,)

  def __repr__(self) -> str:
    where = 'received' if self.origin is not None else 'allocated here'
    if not self.opened:
      return f'CudaIpcTensor({where}, not opened)'
    return f'CudaIpcTensor(shape={tuple(self.tensor.shape)}, {self.tensor.device}, {where})'


def open_cuda_ipc(origin: Origin) -> CudaIpcTensor:
  r"""The tensor of ``origin`` for this process: a ``CudaIpcTensor`` that
  opens it on first use and hands ``origin`` on when pickled again."""
  return CudaIpcTensor(None, origin)
