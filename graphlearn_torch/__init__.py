"""graphlearn_torch: distributed graph learning for PyTorch and PyG.

GraphLearn-for-PyTorch 0.2.x compatible: ``import graphlearn_torch as glt``.
"""

import logging

from . import (
  _ext,  # noqa: F401  (loads the extension and its ops, torch.ops.glt)
  channel,
  data,
  datasets,
  distributed,
  loader,
  partition,
  sampler,
  typing,
  utils,
)
from .compat import install as _install_glt_paths
from .typing import *  # noqa: F403 (GLT re-exports its typing names at package level)

_install_glt_paths()  # GLT's module paths and names (compat.py)

__version__ = '0.1.0'

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = typing.__all__ + [
  '__version__',
  'channel',
  'data',
  'datasets',
  'distributed',
  'loader',
  'partition',
  'sampler',
  'typing',
  'utils',
]
