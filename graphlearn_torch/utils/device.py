"""Device helpers: fall back to the CPU where CUDA is not available."""

import logging
from typing import Optional, Union

import torch

logger = logging.getLogger(__name__)


def resolve_device(device: Optional[Union[torch.device, str, int]]) -> torch.device:
  """Returns ``device``, or the CPU when it names CUDA and CUDA is unavailable.

  GLT defaults many devices to ``cuda:0``; on a machine without a GPU the
  same script runs on the CPU instead of failing.
  """
  if device is None:
    return torch.device('cpu')
  if isinstance(device, int):
    device = torch.device('cuda', device)
  device = torch.device(device)
  if device.type == 'cuda' and not torch.cuda.is_available():
    logger.info('CUDA is not available; using the CPU instead of %s', device)
    return torch.device('cpu')
  return device
