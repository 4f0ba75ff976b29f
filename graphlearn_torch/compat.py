"""GraphLearn-for-PyTorch 0.2.x's module paths and older names, in one place.

The package's modules carry only their own names. GLT scripts import from
GLT's module paths (``graphlearn_torch.distributed.dist_neighbor_sampler``,
``graphlearn_torch.partition.base``) and from this package's own earlier
ones (``graphlearn_torch.distributed.rpc``, ``graphlearn_torch.loader.batch``),
and call GLT's names of some methods (``producer.sample()``). This module
maps each to where it lives now. ``graphlearn_torch/__init__.py`` applies it
last, so every path and name works once ``graphlearn_torch`` is imported,
and ``test/test_compat.py`` checks each of them.
"""

import abc
import importlib
import sys
import types
import typing
from typing import Dict, Iterable, Tuple

from .data.graph import Graph
from .distributed.sources.collocated import DistCollocatedSamplingProducer
from .utils import checkpoint, common

PACKAGE = __name__.rsplit('.', 1)[0]

# An earlier module path and the modules whose names it holds now. A path of
# one module is that module itself; a path of several is a module of their
# public names.
MODULE_PATHS: Dict[str, Tuple[str, ...]] = {
  # GLT's paths
  'distributed.dist_client': ('distributed.runtime.client',),
  'distributed.dist_context': ('distributed.runtime.context',),
  'distributed.dist_neighbor_sampler': (
    'distributed.sampling.neighbor_sampler',
    'distributed.sampling.partition_service',
  ),
  'distributed.dist_options': ('distributed.sources.options',),
  'distributed.dist_sampling_producer': (
    'distributed.sources.collocated',
    'distributed.sources.multiprocess',
    'distributed.sources.sampling_process',
    'distributed.sources.server',
  ),
  'distributed.event_loop': ('distributed.runtime.event_loop',),
  'distributed.rpc': ('distributed.runtime.rpc', 'distributed.runtime.service'),
  'partition.base': (
    'partition.partitioner',
    'partition.summary',
    'partition.format',
    'partition.load',
    'partition.reader',
    'partition.partition_book',
  ),
  # this package's paths before distributed/ and batch/ had floors
  'distributed.batch_source': ('distributed.sources.base',),
  'distributed.collocated_producer': ('distributed.sources.collocated',),
  'distributed.message': ('batch.codec',),
  'distributed.mp_producer': (
    'distributed.sources.multiprocess',
    'distributed.sources.sampling_process',
  ),
  'distributed.partition_service': ('distributed.sampling.partition_service',),
  'distributed.remote_source': ('distributed.sources.remote',),
  'distributed.rendezvous': ('distributed.runtime.rendezvous',),
  'distributed.server_producer': ('distributed.sources.server',),
  'loader.batch': ('batch.sampled', 'batch.pyg'),
  'loader.collect': ('batch.features',),
  'loader.transform': ('batch.pyg', 'batch.labels', 'batch.features'),
}


# Modules that still exist, and the modules that hold names they had.
MOVED_NAMES: Dict[str, Tuple[str, ...]] = {
  'partition.load': ('partition.reader',),
  'sampler.multihop': ('sampler.schema', 'sampler.link'),
}


def _defined_names(module: types.ModuleType) -> Iterable[Tuple[str, object]]:
  r"""``module``'s public names, less the modules and the typing helpers it
  imports."""
  for name, value in vars(module).items():
    if name.startswith('_') or isinstance(value, types.ModuleType):
      continue
    if getattr(typing, name, None) is value or getattr(abc, name, None) is value:
      continue
    yield name, value


def _module_of(path: str, sources: Tuple[str, ...]) -> types.ModuleType:
  modules = [importlib.import_module(f'{PACKAGE}.{s}') for s in sources]
  if len(modules) == 1:
    return modules[0]
  module = types.ModuleType(f'{PACKAGE}.{path}', f"GLT's path of: {', '.join(sources)}.")
  for source in modules:
    for name, value in _defined_names(source):
      setattr(module, name, value)
  return module


def install_module_paths() -> None:
  r"""Makes every path of ``MODULE_PATHS`` importable, and an attribute of
  its package, as ``import`` would have made it; gives the modules of
  ``MOVED_NAMES`` the names they had."""
  for path, sources in MODULE_PATHS.items():
    full = f'{PACKAGE}.{path}'
    module = _module_of(path, sources)
    sys.modules[full] = module
    parent, _, leaf = full.rpartition('.')
    setattr(sys.modules[parent], leaf, module)
  for path, sources in MOVED_NAMES.items():
    module = importlib.import_module(f'{PACKAGE}.{path}')
    for source in sources:
      for name, value in _defined_names(importlib.import_module(f'{PACKAGE}.{source}')):
        if not hasattr(module, name):
          setattr(module, name, value)


# GLT's names of methods, beside ours: (class, GLT's name, our name).
METHOD_NAMES = (
  (DistCollocatedSamplingProducer, 'reset', 'start_epoch'),
  (DistCollocatedSamplingProducer, 'sample', 'next_message'),
)

# GLT's names of functions, in the module GLT has them in.
FUNCTION_NAMES = (
  (common, 'save_ckpt', checkpoint.save_ckpt),
  (common, 'load_ckpt', checkpoint.load_ckpt),
)


def graph_handler(graph: Graph):
  r"""The graph's topology (GLT's ``Graph.graph_handler()``)."""
  return graph.topo


def install_names() -> None:
  r"""Gives the classes and modules GLT's names of their methods and
  functions."""
  for cls, glt_name, ours in METHOD_NAMES:
    setattr(cls, glt_name, getattr(cls, ours))
  for module, name, value in FUNCTION_NAMES:
    setattr(module, name, value)
  Graph.graph_handler = graph_handler


def install() -> None:
  install_module_paths()
  install_names()
