"""Loads the compiled extension with a clear error when it is missing.

Loading it registers the kernels as dispatcher ops, called as
``torch.ops.glt.<op>`` (the device of the inputs picks the CPU or CUDA
kernel); ``ops`` holds what is more than an op: the inducer, the
shared-memory queue, the pooled feature gather."""

import torch  # noqa: F401  (first: the extension links against torch's libraries)

try:
  from . import _C  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only on a broken install
  raise ImportError(
    'graphlearn_torch._C, the compiled extension, could not be loaded. Build it with '
    '`pip install --no-build-isolation -e .` after installing torch (see README). '
    f'Cause: {e}'
  ) from e

ops = _C


def cuda_kernels_available() -> bool:
  """Whether GPU kernels can run here: torch sees a GPU and this build of
  the extension has the CUDA kernels. Every GPU option falls back to the CPU
  path (with a log line) where this is False."""
  return torch.cuda.is_available() and hasattr(_C, 'CudaInducer')


def has_kernel(op: str, device: torch.device) -> bool:
  """Whether ``torch.ops.glt.<op>`` runs on tensors on ``device``: every op
  has a CPU kernel, and a build with the CUDA kernels (where a GPU is seen)
  has a CUDA one for each (``tools/check_cuda_build.py`` holds that).

  Args:
    op: the op's name, e.g. ``'bucket_by_partition'``.
    device: where its inputs are.
  """
  return device.type == 'cpu' or (device.type == 'cuda' and cuda_kernels_available())
