"""Loads the compiled extension with a clear error when it is missing."""

try:
  from . import _C  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only on a broken install
  raise ImportError(
    'graphlearn_torch._C, the compiled extension, could not be loaded. Build it with '
    '`pip install --no-build-isolation -e .` after installing torch (see README). '
    f'Cause: {e}'
  ) from e

ops = _C
