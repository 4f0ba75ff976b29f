"""Time and peak memory to partition an ogbn-products-size graph.

  python benchmarks/bench_partition.py [--scale 1.0] [--parts 2 4] [--workdir .bench]

Writes a seeded power-law graph with ogbn-products' size (2,449,029 nodes,
123,718,280 directed edges) and a 100-dim fp32 feature table to .npy files once,
then runs each partitioning in a fresh process that memory-maps them, and
reports wall time and peak RSS (the input itself is 1.98 GB of edges and
0.98 GB of features) of the random, streaming and METIS partitioners
(``--kinds``). Beside METIS it runs the peer: pymetis.part_graph on the
same undirected graph (METIS alone, reading nothing and writing nothing),
measured in the same run, so the ratio is the cost of our whole pipeline
(symmetrising, METIS, writing every partition) over METIS's own.
"""

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import torch
from results import Results, Table, add_results_argument
from workloads import NUM_NODES, NUM_UNDIRECTED

import graphlearn_torch as glt

FEATURE_DIM = 100

CHILD = textwrap.dedent(
  """
  import json, resource, shutil, sys, time
  import numpy as np, torch
  import graphlearn_torch as glt
  from graphlearn_torch.partition.metis_partitioner import symmetric_adjacency

  workdir, kind, num_parts = sys.argv[1], sys.argv[2], int(sys.argv[3])
  edges = np.load(f'{workdir}/edges.npy', mmap_mode='r')
  feats = np.load(f'{workdir}/feats.npy', mmap_mode='r')
  num_nodes = feats.shape[0]
  out = f'{workdir}/out-{kind}-{num_parts}'
  t = time.perf_counter()
  if kind == 'pymetis':
    import pymetis
    e = torch.from_numpy(np.asarray(edges))
    indptr, indices = symmetric_adjacency(e[0], e[1], num_nodes)
    del e
    adj = pymetis.CSRAdjacency(indptr.numpy(), indices.numpy())
    t = time.perf_counter()  # METIS alone
    pymetis.part_graph(num_parts, adj, recursive=False)
    cut = float('nan')
  else:
    cls = {'random': glt.partition.RandomPartitioner, 'metis': glt.partition.MetisPartitioner,
           'streaming': glt.partition.StreamingPartitioner}[kind]
    summary = cls(out, num_parts, num_nodes, edges, node_feat=feats, progress=False).partition()
    cut = summary.cut_ratio
  seconds = time.perf_counter() - t
  shutil.rmtree(out, ignore_errors=True)
  peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
  print(json.dumps({'seconds': seconds, 'peak_rss': peak, 'cut': cut}))
  """
)


def write_inputs(workdir: str, scale: float, seed: int) -> None:
  num_nodes = int(NUM_NODES * scale)
  half = int(NUM_UNDIRECTED * scale)
  if os.path.exists(os.path.join(workdir, 'feats.npy')):
    shape = np.load(os.path.join(workdir, 'feats.npy'), mmap_mode='r').shape
    if shape == (num_nodes, FEATURE_DIM):
      return
  os.makedirs(workdir, exist_ok=True)
  edges = torch.empty(2, 2 * half, dtype=torch.int64)
  glt.datasets.power_law_edges(num_nodes, half, exponent=0.5, seed=seed, out=edges[:, :half])
  edges[0, half:] = edges[1, :half]
  edges[1, half:] = edges[0, :half]
  np.save(os.path.join(workdir, 'edges.npy'), edges.numpy())
  del edges
  feats = np.lib.format.open_memmap(
    os.path.join(workdir, 'feats.npy'), 'w+', np.float32, (num_nodes, FEATURE_DIM)
  )
  g = torch.Generator().manual_seed(seed)
  for s in range(0, num_nodes, 1 << 18):
    n = min(1 << 18, num_nodes - s)
    feats[s : s + n] = torch.randn(n, FEATURE_DIM, generator=g).numpy()
  feats.flush()
  del feats


def run_child(workdir: str, kind: str, num_parts: int) -> dict:
  out = subprocess.run(
    [sys.executable, '-c', CHILD, workdir, kind, str(num_parts)],
    capture_output=True,
    text=True,
    timeout=3600,
  )
  if out.returncode != 0:
    raise RuntimeError(f'{kind} {num_parts} failed:\n{out.stderr[-3000:]}')
  return json.loads(out.stdout.strip().splitlines()[-1])


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--scale', type=float, default=1.0, help='graph size relative to products')
  p.add_argument('--parts', type=int, nargs='+', default=[2, 4])
  p.add_argument('--workdir', default='.bench/partition')
  p.add_argument('--seed', type=int, default=0)
  p.add_argument('--kinds', nargs='+', default=['random', 'streaming', 'metis'])
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_partition', args)

  t = time.perf_counter()
  write_inputs(args.workdir, args.scale, args.seed)
  edges = np.load(os.path.join(args.workdir, 'edges.npy'), mmap_mode='r')
  feats = np.load(os.path.join(args.workdir, 'feats.npy'), mmap_mode='r')
  print(
    f'graph: {feats.shape[0]:,} nodes, {edges.shape[1]:,} directed edges, '
    f'{FEATURE_DIM}-dim fp32 features; input {edges.nbytes / 1e9:.2f} GB edges + '
    f'{feats.nbytes / 1e9:.2f} GB features (ready in {time.perf_counter() - t:.0f} s); '
    f'{torch.get_num_threads()} threads'
  )
  rows = []
  for num_parts in args.parts:
    for kind in args.kinds:
      r = run_child(args.workdir, kind, num_parts)
      peer = run_child(args.workdir, 'pymetis', num_parts) if kind == 'metis' else None
      rows.append(
        [f'{kind}, {num_parts} parts', r['seconds'], r['peak_rss'] / 1e9, r['cut'],
         peer['seconds'] if peer else None, r['seconds'] / peer['seconds'] if peer else None,
         peer['peak_rss'] / 1e9 if peer else None]
      )  # fmt: skip
      print(rows[-1], flush=True)
  table = results.add(
    Table(
      'partition',
      f'Partitioning {feats.shape[0]:,} nodes and {edges.shape[1]:,} directed edges, '
      f'{FEATURE_DIM}-dim fp32 features',
      [
        'partitioner',
        'seconds',
        'peak RSS, GB',
        'edge cut',
        'pymetis alone, s',
        'ours vs pymetis (time)',
        'pymetis peak RSS, GB',
      ],  # fmt: skip
      rows,
      chart={'label': 'partitioner', 'value': 'peak RSS, GB'},
      note='Each partitioning in a fresh process that memory-maps the input .npy files; '
      'ours writes every partition, pymetis.part_graph runs METIS alone on the same '
      'undirected graph, reading and writing nothing.',
    )
  )
  print(table.render())
  results.write()


if __name__ == '__main__':
  main()
