"""Device helpers: fall back to the CPU where CUDA is not available."""

import itertools
import logging
from typing import Any, List, Optional, Union

import torch

logger = logging.getLogger(__name__)


def resolve_device(device: Optional[Union[torch.device, str, int]]) -> torch.device:
  """Returns ``device``, or the CPU when it names CUDA and CUDA is unavailable.

  GLT defaults many devices to ``cuda:0``; on a machine without a GPU the
  same script runs on the CPU instead of failing. Names are read in any
  case ('CPU', 'cuda:0').
  """
  if device is None:
    return torch.device('cpu')
  if isinstance(device, int):
    device = torch.device('cuda', device)
  if isinstance(device, str):
    device = device.lower()  # GLT scripts write 'CPU' / 'CUDA' too
  device = torch.device(device)
  if device.type == 'cuda' and not torch.cuda.is_available():
    logger.info('CUDA is not available; using the CPU instead of %s', device)
    return torch.device('cpu')
  return device


def get_available_device(device: Optional[Union[torch.device, str, int]] = None) -> torch.device:
  """``device`` when given; else the current CUDA device, or the CPU without CUDA."""
  if device is not None:
    return torch.device(device)
  if torch.cuda.is_available():
    return torch.device('cuda', torch.cuda.current_device())
  return torch.device('cpu')


_next_cuda_device = itertools.count()


def assign_device() -> torch.device:
  """The next CUDA device, round robin over the visible ones; the CPU without CUDA."""
  if torch.cuda.is_available():
    return torch.device('cuda', next(_next_cuda_device) % torch.cuda.device_count())
  return torch.device('cpu')


def ensure_device(device: torch.device) -> None:
  """Makes ``device`` the current CUDA device when it is one."""
  device = torch.device(device)
  if device.type == 'cuda' and device.index is not None and torch.cuda.is_available():
    if device.index != torch.cuda.current_device():
      torch.cuda.set_device(device)


def to_device_async(t: torch.Tensor, device: torch.device) -> torch.Tensor:
  """``t`` on ``device``: a host tensor goes to a GPU without stopping the
  host (staged in pinned memory, which torch keeps until the copy is done,
  so the host memory of ``t`` may be released or reused at once).

  Args:
    t: the tensor.
    device: where it goes.
  """
  device = torch.device(device)
  if t.device == device:
    return t
  if t.is_cpu and device.type == 'cuda':
    return t.pin_memory().to(device, non_blocking=True)
  return t.to(device)


def on_device(x: Any, device: torch.device) -> Any:
  """``x`` on ``device``: a tensor (``Tensor.to``; one there already as it
  is, without the call), a dict of them, or anything else as it is.

  Args:
    x: the tensor, dict or other value.
    device: where the tensors go.
  """
  if isinstance(x, dict):
    return {k: on_device(v, device) for k, v in x.items()}
  if isinstance(x, torch.Tensor) and x.device != device:
    return x.to(device)
  return x


def to_host_at_once(tensors: List[torch.Tensor]) -> List[torch.Tensor]:
  """``tensors`` on the host: those on a GPU copied into pinned memory
  without waiting, then one wait for all of them (one host sync, not one a
  tensor); host tensors as they are.

  Args:
    tensors: the tensors, on the host or on GPUs.
  """
  out, waits = [], set()
  for t in tensors:
    if t.is_cuda:
      host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
      host.copy_(t, non_blocking=True)
      waits.add(t.device)
      t = host
    out.append(t)
  for device in waits:
    torch.cuda.current_stream(device).synchronize()
  return out


def batch_to_device(batch: Any, device: torch.device) -> Any:
  """``batch`` (a PyG ``Data`` or ``HeteroData``) on ``device``: on a GPU,
  its host tensors are copied all at once and the host waits once for all
  of them (not once a tensor), and only where there were any. Their host
  memory (a channel's, which a producer may reuse once it is released) is
  held until the copies are done.

  Args:
    batch: the batch.
    device: where it goes.
  """
  device = torch.device(device)
  if device.type != 'cuda':
    return batch.to(device)
  held = []
  batch.apply(lambda t: (held.append(t) or t) if t.is_cpu else t)
  batch = batch.to(device, non_blocking=True)
  if held:
    torch.cuda.current_stream(device).synchronize()
  return batch
