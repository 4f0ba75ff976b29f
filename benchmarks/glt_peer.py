"""GLT 0.2.4's CPU sampler and feature gather, measured as bench_sampler.py asks.

  GLT_PYTHON/bin/python benchmarks/glt_peer.py DIR --threads 2 --fanout 15 10 5 --seed 0

Run by bench_sampler.py --glt-python in a separate environment that has
GraphLearn-for-PyTorch (import name ``graphlearn_torch``, like ours) installed,
so the two libraries never share a process. DIR holds what bench_sampler.py
wrote (numpy .npy files):
  - indptr.npy, indices.npy: the graph in CSC (destination-major), as ours holds it;
  - seeds.npy: the [batches, batch_size] seed batches ours sampled;
  - gather_ids.npy, gather_offsets.npy: the node sets of ours' sampled batches,
    concatenated, to gather feature rows for.
Prints one JSON line with the figures.

GLT is configured as its users would for speed on a CPU machine:
``NeighborSampler(..., device='cpu', seed=...)`` on a ``Graph`` in 'CPU' mode
(with a seed, as GLT's distributed producers run it through seed_everything;
without one its CPU kernel reads std::random_device once per seed node), and a
``Feature(with_gpu=False)`` whose lookups are ``feature[ids]``.

GLT 0.2.4 imports ``torch_sparse`` at import time (graphlearn_torch.utils.topo)
but uses it only to convert COO input. torch-sparse has no wheel here, so when it
is missing a module that raises on any use stands in for it; the CSC input used
here never reaches it.
"""

import importlib.metadata
import json
import os
import sys
import time
import types

import torch
from peer_protocol import load, parse_peer_args, time_calls


def import_glt():
  r"""GLT's ``graphlearn_torch`` module, with a stand-in for a missing torch_sparse."""
  try:
    import torch_sparse  # noqa: F401
  except ImportError:
    stand_in = types.ModuleType('torch_sparse')

    def missing(name):
      if name.startswith('__'):  # module probes (inspect's __file__), not uses
        raise AttributeError(name)
      raise ImportError(f'torch_sparse.{name}: torch-sparse is not installed')

    stand_in.__getattr__ = missing
    sys.modules['torch_sparse'] = stand_in
  import graphlearn_torch

  return graphlearn_torch


def library_version(glt) -> str:
  r"""The version of the ``graphlearn_torch`` that runs: what a build from
  source recorded (``make glt-gpu-peer`` writes version.txt beside GLT's
  package), its install's, or for a source tree found through PYTHONPATH
  and not installed in this environment (ab_builds.py's trees), the
  tree's path."""
  package = os.path.dirname(os.path.abspath(glt.__file__))
  recorded = os.path.join(package, 'version.txt')
  if os.path.exists(recorded):
    with open(recorded) as f:
      return f.read().strip()
  try:
    return importlib.metadata.version('graphlearn-torch')
  except importlib.metadata.PackageNotFoundError:
    return 'source tree ' + os.path.dirname(package)


def time_sampling(glt, sampler, seeds, batches: int, sync=lambda: None) -> dict:
  r"""``time_calls`` of GLT's ``sampler`` on batches of ``seeds`` (taken in
  turn)."""

  def sample(i: int):
    out = sampler.sample_from_nodes(glt.sampler.NodeSamplerInput(seeds[i % len(seeds)]))
    return out.row.numel(), out.node.numel()

  return time_calls(sample, batches, sync)


def main():
  args = parse_peer_args(__doc__.split('\n')[0])
  glt = import_glt()

  # GLT takes CSC input as (row indices, column pointers).
  topo = glt.data.Topology(
    (load(args.dir, 'indices').long(), load(args.dir, 'indptr').long()),
    input_layout='CSC',
    layout='CSC',
  )
  graph = glt.data.Graph(topo, mode='CPU')
  sampler = glt.sampler.NeighborSampler(
    graph, args.fanout, device=torch.device('cpu'), edge_dir='in', seed=args.seed
  )
  sampled = time_sampling(glt, sampler, list(load(args.dir, 'seeds')), args.batches)

  ids = load(args.dir, 'gather_ids')
  bounds = load(args.dir, 'gather_offsets').tolist()
  id_batches = [ids[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1)]
  table = torch.randn(graph.row_count, args.dim)
  feature = glt.data.Feature(table, with_gpu=False)
  feature[id_batches[0]]
  t = time.perf_counter()
  for _ in range(args.repeat):
    for batch in id_batches:
      feature[batch]
  gather_s = time.perf_counter() - t
  assert torch.equal(feature[id_batches[0]], table[id_batches[0]])

  print(
    json.dumps(
      {
        'glt': library_version(glt),
        'torch': torch.__version__,
        'threads': args.threads,
        **sampled,
        'gather_rows_per_s': args.repeat * ids.numel() / gather_s,
      }
    )
  )


if __name__ == '__main__':
  main()
