"""Time to the first batch on one machine: from a PyG ``Data`` in memory to
a loader's first batch, ours beside PyG's own, plain and temporal.

  python benchmarks/bench_startup.py [--scale 1.0] [--pyg-python .venv-pyg/bin/python]

The graph is bench_sampler.py's (ogbn-products' size, Zipf endpoints, the
edges in random order) with 100-dim fp32 features, labels, a random time
per node and 10% of the nodes to train on. Each row runs in a fresh process
(startup_peer.py) that loads it into a ``Data`` and then times, until the
first batch of 1024 shuffled seeds (fanout [15, 10, 5]):
  - ours: our NeighborLoader on a Dataset built from the Data;
  - ours in PyG's loader: PyG's NodeLoader on our PyGNeighborSampler;
  - PyG: PyG's NeighborLoader on pyg-lib (``--pyg-python``, ``make pyg-peer``);
each plain and by node time (``time_attr``), with the peak memory it added
(RSS); the loader's construction (its sampler's included) is also timed
alone. The rows run ``--rounds`` times, interleaved; the table holds each
row's median.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from results import Results, Table, add_results_argument
from workloads import NUM_NODES, NUM_UNDIRECTED

import graphlearn_torch as glt

HERE = Path(__file__).resolve().parent
ROWS = [
  ('ours: NeighborLoader', 'glt'),
  ("ours: PyG's NodeLoader on PyGNeighborSampler", 'glt-pyg'),
  ("PyG 2.8: NeighborLoader (pyg-lib)", 'pyg'),
]  # fmt: skip


def write_graph(root: Path, scale: float, dim: int, seed: int) -> int:
  r"""Writes the graph, features, labels, node times and training nodes
  (startup_peer.py's files); returns the number of directed edges."""
  num_nodes, half = int(NUM_NODES * scale), int(NUM_UNDIRECTED * scale)
  edges = torch.empty(2, 2 * half, dtype=torch.int64)
  glt.datasets.power_law_edges(num_nodes, half, exponent=0.5, seed=seed, out=edges[:, :half])
  edges[0, half:] = edges[1, :half]
  edges[1, half:] = edges[0, :half]
  np.save(root / 'edge_index.npy', edges.numpy())
  del edges
  g = torch.Generator().manual_seed(seed)
  np.save(root / 'x.npy', torch.rand(num_nodes, dim, generator=g).numpy())
  np.save(root / 'y.npy', torch.randint(0, 47, (num_nodes,), generator=g).numpy())
  np.save(root / 'time.npy', torch.randint(0, 1000, (num_nodes,), generator=g).numpy())
  train = torch.randperm(num_nodes, generator=g)[: num_nodes // 10]
  np.save(root / 'train.npy', train.sort().values.numpy())
  return 2 * half


def run_row(python: str, root: Path, loader: str, temporal: bool, threads: int) -> dict:
  r"""startup_peer.py's figures for one row, in a fresh process of ``python``."""
  env = {k: v for k, v in os.environ.items() if k not in ('VIRTUAL_ENV',)}
  if loader == 'pyg':
    env.pop('PYTHONPATH', None)  # PyG's environment has no graphlearn_torch
  cmd = [os.path.abspath(python), str(HERE / 'startup_peer.py'), str(root), loader]
  cmd += ['--threads', str(threads)] + (['--temporal'] if temporal else [])
  done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
  if done.returncode != 0:
    sys.exit(f'startup_peer.py {loader} failed ({done.returncode}):\n{done.stderr[-4000:]}')
  return json.loads(done.stdout.strip().splitlines()[-1])


def measure(args, root: Path) -> dict:
  r"""Every row's runs: ``{(loader, temporal): [figures, ...]}``."""
  pythons = {'glt': sys.executable, 'glt-pyg': sys.executable, 'pyg': args.pyg_python}
  runs = {}
  for r in range(args.rounds):
    for temporal in (False, True):
      for name, loader in ROWS:
        if pythons[loader] is None:
          continue
        got = run_row(pythons[loader], root, loader, temporal, args.threads)
        runs.setdefault((loader, temporal), []).append(got)
        kind = 'temporal' if temporal else 'plain'
        print(f'round {r + 1}, {name}, {kind}: {got["seconds"]:.2f} s', flush=True)
  return runs


def table_rows(runs: dict) -> list:
  r"""One row per loader and kind: median seconds to build the loader and
  to its first batch, peak GB, and each against PyG's (None without PyG)."""
  columns = ('build_s', 'seconds', 'peak_gb')
  rows = []
  for temporal in (False, True):
    pyg = runs.get(('pyg', temporal))
    for name, loader in ROWS:
      got = runs.get((loader, temporal))
      if got is None:
        continue
      ours = [statistics.median(g[c] for g in got) for c in columns]
      vs = [None] * 3
      if pyg is not None:
        vs = [v / statistics.median(g[c] for g in pyg) for v, c in zip(ours, columns)]
      rows.append([f'{name}, by node time' if temporal else name, *ours, *vs])
  return rows


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--scale', type=float, default=1.0, help='graph size relative to products')
  p.add_argument('--dim', type=int, default=100)
  p.add_argument('--threads', type=int, default=2)
  p.add_argument('--rounds', type=int, default=3)
  p.add_argument('--seed', type=int, default=0)
  p.add_argument('--pyg-python', help="PyG's environment (make pyg-peer)")
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_startup', args)
  with tempfile.TemporaryDirectory(prefix='bench_startup_') as d:
    num_edges = write_graph(Path(d), args.scale, args.dim, args.seed)
    num_nodes = int(NUM_NODES * args.scale)
    print(f'graph: {num_nodes:,} nodes, {num_edges:,} directed edges; {args.threads} threads')
    runs = measure(args, Path(d))
  table = results.add(
    Table(
      'startup',
      f'From a Data in memory to the first batch, {num_nodes:,} nodes, {num_edges:,} edges',
      [
        'loader',
        'built in, s',
        'first batch at, s',
        'peak memory added, GB',
        'vs PyG (build)',
        'vs PyG (first batch)',
        'vs PyG (memory)',
      ],
      table_rows(runs),
      chart={'label': 'loader', 'value': 'first batch at, s'},
      note=(
        f'{args.dim}-dim fp32 features, labels and a time per node; fanout [15, 10, 5], '
        f'1024 shuffled seeds of 10% of the nodes; the edges in random order; {args.threads} '
        f'threads; median of {args.rounds} runs, each in a fresh process. Peak memory is the '
        "RSS the loader's construction and first batch added over the Data."
      ),
    )  # fmt: skip
  )
  print(table.render())
  results.write()


if __name__ == '__main__':
  main()
