"""One row of bench_startup.py: from a PyG ``Data`` in memory to a loader's
first batch, in a fresh process: the time to build the loader (its sampler
included), to its first batch, and the peak memory that added.

  PYTHON benchmarks/startup_peer.py DIR LOADER [--temporal] [--threads 2]

LOADER is 'glt' (our NeighborLoader on a Dataset built from the Data),
'glt-pyg' (PyG's NodeLoader on our PyGNeighborSampler) or 'pyg' (PyG's
NeighborLoader, on pyg-lib: run in the environment of ``make pyg-peer``).
DIR holds the graph as bench_startup.py writes it (edge_index.npy, x.npy,
y.npy, time.npy, train.npy). Loading it into a ``Data`` is not timed; the
peak RSS is measured over the process's RSS once the Data is in memory.
Prints one JSON line.
"""

import argparse
import json
import resource
import time
from pathlib import Path

import numpy as np
import torch

FANOUT = [15, 10, 5]
BATCH = 1024


def load_data(root: Path):
  from torch_geometric.data import Data

  def array(name):
    return torch.from_numpy(np.load(root / f'{name}.npy'))

  data = Data(edge_index=array('edge_index'), x=array('x'), y=array('y'), time=array('time'))
  data.num_nodes = data.x.size(0)
  return data, array('train')


def loader_glt(data, train, temporal: bool):
  import graphlearn_torch as glt

  ds = glt.data.Dataset(edge_dir='in')
  ds.init_graph(data.edge_index, graph_mode='CPU', num_nodes=data.num_nodes)
  ds.init_node_features(data.x)
  ds.init_node_labels(data.y)
  kwargs = {}
  if temporal:
    ds.init_node_time(data.time)
    kwargs = {'time_attr': 'node_time', 'input_time': data.time[train]}
  return glt.loader.NeighborLoader(
    ds, FANOUT, train, batch_size=BATCH, shuffle=True, device=torch.device('cpu'), **kwargs
  )


def loader_glt_pyg(data, train, temporal: bool):
  from torch_geometric.loader import NodeLoader

  import graphlearn_torch as glt

  time_attr = 'time' if temporal else None
  sampler = glt.sampler.PyGNeighborSampler(data, FANOUT, time_attr=time_attr)
  input_time = data.time[train] if temporal else None
  return NodeLoader(
    data, sampler, input_nodes=train, input_time=input_time, batch_size=BATCH, shuffle=True
  )


def loader_pyg(data, train, temporal: bool):
  import torch_geometric
  from torch_geometric.loader import NeighborLoader

  if not torch_geometric.typing.WITH_PYG_LIB:
    raise SystemExit('pyg-lib does not import in this environment: run make pyg-peer')
  time_attr = 'time' if temporal else None
  input_time = data.time[train] if temporal else None
  return NeighborLoader(
    data, FANOUT, input_nodes=train, input_time=input_time, time_attr=time_attr,
    batch_size=BATCH, shuffle=True,
  )  # fmt: skip


LOADERS = {'glt': loader_glt, 'glt-pyg': loader_glt_pyg, 'pyg': loader_pyg}


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('dir', type=Path)
  p.add_argument('loader', choices=sorted(LOADERS))
  p.add_argument('--temporal', action='store_true')
  p.add_argument('--threads', type=int, default=2)
  args = p.parse_args()
  torch.set_num_threads(args.threads)
  data, train = load_data(args.dir)
  before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  t = time.perf_counter()
  loader = LOADERS[args.loader](data, train, args.temporal)
  build_s = time.perf_counter() - t
  batch = next(iter(loader))
  seconds = time.perf_counter() - t
  peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
  print(
    json.dumps(
      {
        'seconds': seconds,
        'build_s': build_s,
        'peak_gb': peak / 2**20,
        'batch_nodes': int(batch.num_nodes),
        'torch': torch.__version__,
      }
    )
  )


if __name__ == '__main__':
  main()
