"""DeviceMirror: a channel's message bytes mirrored in the consumer's GPU
memory, so that a producer's GPU tensors reach the consumer device to device.

The consumer allocates one buffer on its GPU as large as the channel's
shared memory (its mapping), once; each producer opens it once, by its CUDA
IPC handle (``utils.cuda_share.CudaIpcTensor``). A message's tensors on the GPU are
written into the buffer at the offsets the channel reserved for them in its
shared memory, so the channel's own bookkeeping (which bytes a queued or
received message holds, when they are free again) covers them too: the
shared-memory bytes of such an entry stay unwritten. The consumer copies
them out into memory of its own on a stream of their own and waits for that
copy alone, not for the work queued on its current stream, before the
channel may hand their bytes to the next message.

Sending a GPU tensor as its own IPC handle, as ``torch.multiprocessing``
does, opens and closes a mapping in the consumer and makes an interprocess
event for every tensor of every message; this opens one mapping a producer.
"""

from typing import List, Optional, Sequence, Tuple, Union

import torch

from ..utils.cuda_share import CudaIpcTensor

# A message entry written into the mirror: its key is the tensor's, after
# this prefix.
MIRRORED_PREFIX = '\x00mirrored:'


class DeviceMirror:
  r"""A buffer on one device as large as a channel's shared memory,
  addressed by the same offsets.

  Args:
    memory: the buffer, a 1-D ``uint8`` tensor (a ``CudaIpcTensor`` where
      received from the consumer: opened on first use).
  """

  def __init__(self, memory: Union[torch.Tensor, CudaIpcTensor]):
    self._memory = memory
    self._stream: Optional[torch.cuda.Stream] = None  # the consumer's copies out

  @classmethod
  def allocate(cls, nbytes: int, device: torch.device) -> 'DeviceMirror':
    r"""A mirror of ``nbytes`` bytes on ``device``, for a consumer there."""
    return cls(torch.empty(nbytes, dtype=torch.uint8, device=device))

  @property
  def device_type(self) -> str:
    r"""The type of the buffer's device ('cuda' where received: only GPU
    buffers travel), known without opening it."""
    memory = self._memory
    return 'cuda' if isinstance(memory, CudaIpcTensor) else memory.device.type

  @property
  def memory(self) -> torch.Tensor:
    r"""The buffer (opened here on first use where received).

    Raises:
      RuntimeError: a received buffer cannot be opened.
    """
    memory = self._memory
    if not isinstance(memory, CudaIpcTensor):
      return memory
    try:
      return memory.tensor
    except (RuntimeError, OSError) as e:
      raise RuntimeError(
        "the consumer's GPU mirror of this channel could not be opened (its consumer may "
        f'have exited, or this process may not see its GPU): {type(e).__name__}: {e}'
      ) from e

  def shareable(self) -> CudaIpcTensor:
    r"""The buffer as a producer opens it: by its CUDA IPC handle.

    Raises:
      ValueError: the buffer is not in GPU memory (it cannot leave this
        process without becoming a copy).
    """
    if isinstance(self._memory, CudaIpcTensor):
      return self._memory
    if not self._memory.is_cuda:
      raise ValueError(
        f'a channel mirrored on {self._memory.device} cannot go to another process: only '
        'GPU memory is shared by its handle'
      )
    return CudaIpcTensor(self._memory)

  def place(self, offset: int, like: torch.Tensor) -> torch.Tensor:
    r"""The contiguous tensor of ``like``'s shape and dtype at byte
    ``offset`` of the buffer."""
    nbytes = like.numel() * like.element_size()
    memory = self.memory
    if nbytes == 0:  # an empty entry has no place (nor a meaningful offset)
      return torch.empty(like.shape, dtype=like.dtype, device=memory.device)
    if offset < 0 or offset + nbytes > memory.numel():
      raise ValueError(
        f'an entry of {nbytes} bytes at offset {offset} is outside the mirror of '
        f'{memory.numel()} bytes'
      )
    return typed_view(memory, offset, like)

  def write(self, entries: Sequence[Tuple[int, torch.Tensor]]) -> None:
    r"""Copies each ``(offset, tensor)`` into its place (behind the kernels
    that make the tensor) and waits for the copies.

    Args:
      entries: the byte offsets and the tensors (any device) to write there.
    """
    for offset, value in entries:
      self.place(offset, value).copy_(value, non_blocking=True)
    devices = {value.device for _, value in entries} | {self.memory.device}
    for device in devices:
      if device.type == 'cuda':
        torch.cuda.current_stream(device).synchronize()

  def read(self, entries: Sequence[Tuple[int, torch.Tensor]]) -> List[torch.Tensor]:
    r"""Copies of the tensors at each ``(offset, like)``, in memory of this
    process's own on the buffer's device (one allocation for them all),
    complete when this returns (their places may then be
    written again).

    Args:
      entries: the byte offsets and tensors of the shapes and dtypes to read.
    """
    memory = self.memory
    sources = [self.place(offset, like) for offset, like in entries]
    if not memory.is_cuda:
      return copied(sources)
    current = torch.cuda.current_stream(memory.device)
    if self._stream is None:
      self._stream = torch.cuda.Stream(memory.device)
    # On a stream of their own: the current one may hold a training step's
    # kernels, which the wait below must not wait for.
    with torch.cuda.stream(self._stream):
      copies = copied(sources)
    self._stream.synchronize()
    if copies:  # one buffer: freed behind the current stream's reads of any of them
      copies[0].record_stream(current)
    return copies


# Where each copy starts in copied's buffer: a multiple of this many bytes.
COPY_ALIGNMENT = 64


def copied(sources: Sequence[torch.Tensor]) -> List[torch.Tensor]:
  r"""Contiguous copies of ``sources`` (on one device) in one new buffer."""
  if not sources:
    return []
  starts, end = [], 0
  for source in sources:
    starts.append(end)
    nbytes = source.numel() * source.element_size()
    end += (nbytes + COPY_ALIGNMENT - 1) // COPY_ALIGNMENT * COPY_ALIGNMENT
  buffer = torch.empty(end, dtype=torch.uint8, device=sources[0].device)
  copies = [typed_view(buffer, start, source) for start, source in zip(starts, sources)]
  for copy, source in zip(copies, sources):
    copy.copy_(source, non_blocking=True)
  return copies


def typed_view(buffer: torch.Tensor, start: int, like: torch.Tensor) -> torch.Tensor:
  r"""The bytes of the 1-D ``uint8`` ``buffer`` from ``start`` as a
  contiguous tensor of ``like``'s shape and dtype."""
  nbytes = like.numel() * like.element_size()
  return buffer[start : start + nbytes].view(like.dtype).view(like.shape)
