"""CUDA tensors that every process they reach can hand on.

torch pickles a CUDA tensor for another process as a CUDA IPC handle of
its memory, which only the process that allocated the memory can make: a
process that received a tensor cannot send it on. A launcher that places a
partition on a GPU for the trainers it starts there, each of which starts
sampling processes on that GPU, would leave each trainer to place a copy of
its own for them. ``CudaIpcTensor`` travels as the handle of the process
that allocated it, whichever process pickles it, so every process of the
chain reads the one copy.

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
    tensor: the tensor (in GPU memory).
    origin: how its allocating process pickled it (None: this process
      allocated it, and pickles it anew each time, as torch does).
  """

  def __init__(self, tensor: torch.Tensor, origin: Optional[Origin] = None):
    self.tensor = tensor
    self.origin = origin

  def __reduce__(self):
    origin = self.origin if self.origin is not None else reductions.reduce_tensor(self.tensor)
    return open_cuda_ipc, (origin,)

  def __repr__(self) -> str:
    where = 'received' if self.origin is not None else 'allocated here'
    return f'CudaIpcTensor(shape={tuple(self.tensor.shape)}, {self.tensor.device}, {where})'


def open_cuda_ipc(origin: Origin) -> CudaIpcTensor:
  r"""The tensor of ``origin``, opened in this process: a ``CudaIpcTensor``
  that hands ``origin`` on when pickled again."""
  rebuild, args = origin
  return CudaIpcTensor(rebuild(*args), origin)
