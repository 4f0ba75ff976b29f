"""Every module path the package ever had still imports, with the names it
had: GLT's paths (``partition.base``, ``distributed.dist_sampling_producer``)
and this package's own earlier ones, all mapped in ``compat.py``."""

import importlib
import json
import pathlib
import subprocess
import sys

import pytest
import torch

import graphlearn_torch as glt
from graphlearn_torch import compat

# Every public module path of the package, and its public names, as they were
# before distributed/ and batch/ had floors (written by glt_surface's
# public_names at commit 33a0213).
PATHS = json.loads((pathlib.Path(__file__).parent / 'data' / 'module_paths.json').read_text())


# Names that went on purpose, and why.
REMOVED = {
  'graphlearn_torch.distributed.dist_feature.RpcFeatureShareCallee': (
    'an internal RPC callee: HostPeers hands out topologies and feature tables in one request'
  ),
  'graphlearn_torch.partition.partition_book.partition_sizes': 'dead code: nothing called it',
  'graphlearn_torch.loader.base.check_kwargs': (
    "a loader's arguments are checked by the signature loader_options gives it"
  ),
  'graphlearn_torch.sampler.neighbor_sampler.build_neighbor_sampler': (
    "the loaders' builder, now loader.options.build_neighbor_sampler of a LoaderOptions"
  ),
}


@pytest.mark.parametrize('path', sorted(PATHS))
def test_every_earlier_module_path_imports_with_its_names(path):
  module = importlib.import_module(path)
  missing = [
    name for name in PATHS[path] if not hasattr(module, name) and f'{path}.{name}' not in REMOVED
  ]
  assert missing == [], f'{path} lost {missing}'


def test_a_path_of_one_module_is_that_module():
  for path, sources in compat.MODULE_PATHS.items():
    old = importlib.import_module(f'graphlearn_torch.{path}')
    if len(sources) == 1:
      assert old is importlib.import_module(f'graphlearn_torch.{sources[0]}'), path
    parent, _, leaf = f'graphlearn_torch.{path}'.rpartition('.')
    assert getattr(importlib.import_module(parent), leaf) is old, path


def test_earlier_paths_import_first_thing_in_a_fresh_interpreter():
  code = (
    'from graphlearn_torch.distributed.dist_sampling_producer import DistMpSamplingProducer\n'
    'import graphlearn_torch.distributed.rpc as rpc\n'
    'from graphlearn_torch.partition.base import load_partition, PartitionerBase\n'
    'from graphlearn_torch.loader.transform import to_data, label_batch\n'
    'assert rpc.init_rpc and rpc.rpc_service_request_async and rpc.RpcDataPartitionRouter\n'
  )
  done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
  assert done.returncode == 0, done.stderr[-3000:]


def test_glt_method_and_function_names_reach_ours():
  producer = glt.distributed.DistCollocatedSamplingProducer
  assert producer.reset is producer.start_epoch
  assert producer.sample is producer.next_message
  assert glt.distributed.DistMpSamplingProducer.produce_all is (
    glt.distributed.DistMpSamplingProducer.start_epoch
  )
  assert glt.utils.common.save_ckpt is glt.utils.save_ckpt
  topo = glt.data.Topology(__import__('torch').tensor([[0, 1], [1, 0]]))
  graph = glt.data.Graph(topo)
  assert graph.graph_handler() is graph.topo


def test_the_real_modules_carry_no_glt_alias():
  root = pathlib.Path(glt.__file__).parent
  collocated = (root / 'distributed' / 'sources' / 'collocated.py').read_text()
  assert 'def reset' not in collocated and 'def sample(' not in collocated
  assert 'graph_handler' not in (root / 'data' / 'graph.py').read_text()
  assert 'save_ckpt' not in (root / 'utils' / 'common.py').read_text()
  multiprocess = (root / 'distributed' / 'sources' / 'multiprocess.py').read_text()
  assert 'produce_all' not in multiprocess and 'is_all_sampling' not in multiprocess
  sampler = (root / 'sampler' / 'neighbor_sampler.py').read_text()
  assert 'inducer' not in sampler and 'lazy_init' not in sampler


def test_glt_methods_work_on_our_classes():
  edges = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
  graph = glt.data.Graph(glt.data.Topology(edges))
  sampler = glt.sampler.NeighborSampler(graph, [2], device='cpu', with_neg=True, seed=0)
  sampler.lazy_init_sampler()
  sampler.lazy_init_neg_sampler()
  assert sampler.get_inducer() is sampler.get_inducer()
  assert sampler.create_inducer(8) is not sampler.get_inducer()
  out = sampler.sample_from_nodes(glt.sampler.NodeSamplerInput(torch.tensor([0, 2])))
  assert out.node[:2].tolist() == [0, 2] and out.row.numel() == 2  # each has one out-edge


def test_glts_dist_neighbor_sampler_is_at_glts_paths():
  from graphlearn_torch.distributed.dist_neighbor_sampler import DistNeighborSampler

  assert DistNeighborSampler is glt.distributed.DistNeighborSampler is compat.GltDistNeighborSampler
  assert issubclass(DistNeighborSampler, glt.distributed.ConcurrentEventLoop)
  # the sampler of ours stays where it lives: it samples, and nothing else
  from graphlearn_torch.distributed.sampling import neighbor_sampler

  assert neighbor_sampler.DistNeighborSampler is not DistNeighborSampler
  assert not hasattr(neighbor_sampler.DistNeighborSampler, 'add_task')
