"""GraphLearn-for-PyTorch 0.2.x's module paths and older names, in one place.

The package's modules carry only their own names. GLT scripts import from
GLT's module paths (``graphlearn_torch.distributed.dist_neighbor_sampler``,
``graphlearn_torch.partition.base``) and from this package's own earlier
ones (``graphlearn_torch.distributed.rpc``, ``graphlearn_torch.loader.batch``),
call GLT's names of some methods (``producer.sample()``), GLT's methods that
nothing of ours calls (``NeighborSampler.get_inducer``), and GLT's
``DistNeighborSampler``, an event loop that samples batches into messages.
This module maps each to where it lives now, or builds it on what we have.
``graphlearn_torch/__init__.py`` applies it last, so every path and name
works once ``graphlearn_torch`` is imported, and ``test/test_compat.py``
checks each of them.
"""

import __future__

import abc
import importlib
import importlib.abc
import importlib.util
import sys
import types
import typing
from typing import Dict, Iterable, Optional, Tuple

from .data.graph import Graph
from .distributed.runtime.event_loop import ConcurrentEventLoop
from .distributed.sampling.neighbor_sampler import DistNeighborSampler
from .distributed.sources.collocated import DistCollocatedSamplingProducer
from .distributed.sources.messages import MessageSampler
from .distributed.sources.multiprocess import DistMpSamplingProducer
from .sampler.base import SamplingType
from .sampler.neighbor_sampler import NeighborSampler
from .utils import checkpoint, common

PACKAGE = __name__.rsplit('.', 1)[0]

# An earlier module path and the modules whose names it holds now. A path of
# one module is that module itself; a path of several is a module of their
# public names.
MODULE_PATHS: Dict[str, Tuple[str, ...]] = {
  # GLT's paths
  'distributed.dist_client': ('distributed.runtime.client',),
  'distributed.dist_context': ('distributed.runtime.context',),
  'distributed.dist_dataset': ('distributed.data.dataset',),
  'distributed.dist_feature': ('distributed.data.feature',),
  'distributed.dist_graph': ('distributed.data.graph',),
  'distributed.dist_link_neighbor_loader': ('distributed.loaders.link_neighbor_loader',),
  'distributed.dist_loader': ('distributed.loaders.loader',),
  'distributed.dist_neighbor_loader': ('distributed.loaders.neighbor_loader',),
  'distributed.dist_neighbor_sampler': (
    'distributed.sampling.neighbor_sampler',
    'distributed.sampling.partition_service',
  ),
  'distributed.dist_options': ('distributed.sources.options',),
  'distributed.dist_random_partitioner': ('distributed.data.random_partitioner',),
  'distributed.dist_sampling_producer': (
    'distributed.sources.collocated',
    'distributed.sources.multiprocess',
    'distributed.sources.processes',
    'distributed.sources.sampling_process',
    'distributed.sources.server',
  ),
  'distributed.dist_server': ('distributed.server.server',),
  'distributed.dist_subgraph_loader': ('distributed.loaders.subgraph_loader',),
  'distributed.event_loop': ('distributed.runtime.event_loop',),
  'distributed.rpc': ('distributed.runtime.rpc', 'distributed.runtime.service'),
  'partition.base': (
    'partition.partitioner',
    'partition.inputs',
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
    'distributed.sources.processes',
    'distributed.sources.sampling_process',
  ),
  'distributed.partition_service': ('distributed.sampling.partition_service',),
  'distributed.remote_source': ('distributed.sources.remote',),
  'distributed.remote_store': ('distributed.server.remote_store',),
  'distributed.rendezvous': ('distributed.runtime.rendezvous',),
  'distributed.server_producer': ('distributed.sources.server',),
  'loader.batch': ('batch.sampled', 'batch.pyg'),
  'loader.collect': ('batch.features',),
  'loader.transform': ('batch.pyg', 'batch.labels', 'batch.features'),
}


# Modules that still exist, and the modules that hold names they had.
MOVED_NAMES: Dict[str, Tuple[str, ...]] = {
  'distributed.sources.multiprocess': ('distributed.sources.processes',),
  'partition.load': ('partition.reader',),
  'sampler.multihop': ('sampler.schema', 'sampler.link'),
}


def _defined_names(module: types.ModuleType) -> Iterable[Tuple[str, object]]:
  r"""``module``'s public names, less the modules and the typing helpers it
  imports."""
  for name, value in vars(module).items():
    if name.startswith('_') or isinstance(value, types.ModuleType):
      continue
    if any(getattr(helpers, name, None) is value for helpers in (typing, abc, __future__)):
      continue
    yield name, value


class _DeferredPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  r"""Imports a path of ``MODULE_PATHS`` whose module the package does not
  import itself (the client's PyG stores, which import PyG) when a script
  imports it."""

  def __init__(self):
    self.sources: Dict[str, str] = {}

  def find_spec(self, fullname: str, path=None, target=None):
    if fullname not in self.sources:
      return None
    return importlib.util.spec_from_loader(fullname, self)

  def create_module(self, spec) -> types.ModuleType:
    return importlib.import_module(self.sources[spec.name])

  def exec_module(self, module: types.ModuleType) -> None:
    pass  # create_module's module is already imported


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
  ``MOVED_NAMES`` the names they had. A path to one module the package has
  not imported is left to an import finder, which imports it when asked."""
  deferred = _DeferredPaths()
  for path, sources in MODULE_PATHS.items():
    full = f'{PACKAGE}.{path}'
    if len(sources) == 1 and f'{PACKAGE}.{sources[0]}' not in sys.modules:
      deferred.sources[full] = f'{PACKAGE}.{sources[0]}'
      continue
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
  if deferred.sources:
    sys.meta_path.insert(0, deferred)


# GLT's names of methods, beside ours: (class, GLT's name, our name).
METHOD_NAMES = (
  (DistCollocatedSamplingProducer, 'reset', 'start_epoch'),
  (DistCollocatedSamplingProducer, 'sample', 'next_message'),
  (DistMpSamplingProducer, 'produce_all', 'start_epoch'),
)

# GLT's names of functions, in the module GLT has them in.
FUNCTION_NAMES = (
  (common, 'save_ckpt', checkpoint.save_ckpt),
  (common, 'load_ckpt', checkpoint.load_ckpt),
)


# GLT's methods that nothing of ours calls, installed on our classes.


def graph_handler(self: Graph):
  r"""The graph's topology (GLT's ``Graph.graph_handler()``)."""
  return self.topo


def create_inducer(self: NeighborSampler, input_batch_size: int = 0):
  r"""A new inducer over the sampler's node types (GLT's
  ``NeighborSampler.create_inducer``; the batch size is a hint GLT's GPU
  hash table took)."""
  return self.engine.create_inducer()


def get_inducer(self: NeighborSampler, input_batch_size: int = 0):
  r"""The sampler's reusable inducer (GLT's ``NeighborSampler.get_inducer``),
  made on first use."""
  if getattr(self, 'glt_inducer', None) is None:
    self.glt_inducer = create_inducer(self, input_batch_size)
  return self.glt_inducer


def lazy_init_sampler(self: NeighborSampler) -> None:
  r"""Prepares the graphs for sampling (GLT's
  ``NeighborSampler.lazy_init_sampler``; done on first use otherwise)."""
  for graph in self.graphs.values():
    graph.lazy_init()


def lazy_init_neg_sampler(self: NeighborSampler) -> None:
  r"""Prepares negative sampling of every edge type (GLT's
  ``NeighborSampler.lazy_init_neg_sampler``; done on first use otherwise)."""
  for etype in self.graphs:
    self.negative_sampler(etype)


def is_all_sampling_completed(self: DistMpSamplingProducer) -> bool:
  r"""Whether every sampling process sampled all of its share of this epoch
  (GLT's ``DistMpSamplingProducer.is_all_sampling_completed``)."""
  return self.epoch_sampled


def is_all_sampling_completed_and_consumed(self: DistMpSamplingProducer) -> bool:
  r"""Whether every batch of this epoch was sampled and received (GLT's
  ``DistMpSamplingProducer.is_all_sampling_completed_and_consumed``)."""
  return self.remaining == 0


GLT_METHODS = (
  (Graph, graph_handler),
  (NeighborSampler, create_inducer),
  (NeighborSampler, get_inducer),
  (NeighborSampler, lazy_init_sampler),
  (NeighborSampler, lazy_init_neg_sampler),
  (DistMpSamplingProducer, is_all_sampling_completed),
  (DistMpSamplingProducer, is_all_sampling_completed_and_consumed),
)


class GltDistNeighborSampler(ConcurrentEventLoop):
  r"""GLT's ``DistNeighborSampler``: an event loop that samples batches
  across partitions into channel messages (with their features and labels
  when ``collect_features``) and sends them into ``channel``, or returns
  them without one. Our batch sources do this with a
  :class:`~graphlearn_torch.distributed.sampling.neighbor_sampler.DistNeighborSampler`
  and a :class:`~graphlearn_torch.distributed.sources.messages.MessageSampler`;
  this class puts the two behind GLT's constructor and methods.

  Args:
    data: this process's partition.
    num_neighbors: neighbors per hop (a dict by edge type when heterogeneous).
    with_edge: return sampled edge ids.
    with_neg: prepare negative sampling.
    with_weight: sample proportionally to edge weights.
    edge_dir: must be the dataset's.
    collect_features: gather features and labels into the messages.
    channel: where finished batches go; None returns them.
    use_all2all: unsupported; must be False.
    concurrency: batches in flight at once.
    device: where outputs go.
    seed: seeds the random stream.
  """

  def __init__(
    self,
    data,
    num_neighbors=None,
    with_edge: bool = False,
    with_neg: bool = False,
    with_weight: bool = False,
    edge_dir: str = 'out',
    collect_features: bool = False,
    channel=None,
    use_all2all: bool = False,
    concurrency: int = 1,
    device=None,
    seed: Optional[int] = None,
  ):
    if use_all2all:
      raise ValueError('use_all2all is not supported: features are fetched by RPC')
    super().__init__(concurrency)
    sampler = DistNeighborSampler(
      data, num_neighbors, with_edge, with_neg, with_weight, edge_dir, device, seed
    )
    self.messages = MessageSampler(sampler, collect_features)
    self.channel = channel

  def sample_from_nodes(self, inputs, timeout: Optional[float] = None, **kwargs):
    r"""The batch of seed nodes ``inputs`` as a message, or None once it is
    on its way into the channel."""
    return self._run(SamplingType.NODE, inputs, timeout, **kwargs)

  def sample_from_edges(self, inputs, timeout: Optional[float] = None, **kwargs):
    r"""The batch of seed edges ``inputs``, as ``sample_from_nodes``."""
    return self._run(SamplingType.LINK, inputs, timeout, **kwargs)

  def subgraph(self, inputs, timeout: Optional[float] = None, **kwargs):
    r"""The subgraph batch of seed nodes ``inputs``, as ``sample_from_nodes``."""
    return self._run(SamplingType.SUBGRAPH, inputs, timeout, **kwargs)

  def _run(self, sampling_type: SamplingType, inputs, timeout, on_error=None):
    coro = self.messages.message(sampling_type, inputs)
    if self.channel is None:
      return self.run_task(coro, timeout)
    self.add_task(coro, callback=self.channel.send, on_error=on_error, timeout=timeout)
    return None


# GLT's classes where ours differ from them: (module path, name, class).
GLT_CLASSES = (
  ('distributed', 'DistNeighborSampler', GltDistNeighborSampler),
  ('distributed.dist_neighbor_sampler', 'DistNeighborSampler', GltDistNeighborSampler),
)


def install_names() -> None:
  r"""Gives the classes and modules GLT's names of their methods and
  functions, GLT's methods, and GLT's classes where ours differ."""
  for cls, glt_name, ours in METHOD_NAMES:
    setattr(cls, glt_name, getattr(cls, ours))
  for module, name, value in FUNCTION_NAMES:
    setattr(module, name, value)
  for cls, method in GLT_METHODS:
    setattr(cls, method.__name__, method)
  for path, name, cls in GLT_CLASSES:
    setattr(importlib.import_module(f'{PACKAGE}.{path}'), name, cls)


def install() -> None:
  install_module_paths()
  install_names()
