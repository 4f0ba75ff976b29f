"""Partitioning a graph METIS cannot hold here: time, peak memory and cut of
the random and streaming partitioners on a 400 M-edge community graph.

  python benchmarks/bench_partition_large.py [--nodes 10000000]
      [--edges 400000000] [--parts 2 4] [--keep 4] [--memory_limit_gb 12]
      [--workdir .bench/partition_large]

Writes the planted-community graph (16 communities, 90% of the edges inside
them, 128-dim fp16 features, 10% training nodes;
``glt.datasets.write_community_graph``) to .npy files once, chunk by chunk,
then runs each partitioning in a fresh process that memory-maps them, inside
a memory cgroup of ``--memory_limit_gb`` where the machine offers one (v1):
passing the limit fails the run instead of waking the host's OOM killer.
The streaming partitioner balances the training nodes too; both partitioners
take seed 1 (the graph's seed 0 would give the random partitioner the very
permutation that placed the communities). The outputs of
the ``--keep`` partition counts stay under the workdir (``out-<kind>-<parts>``)
for bench_partition_locality.py; the others are removed after their run.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import numpy as np
from results import Results, Table, add_results_argument

import graphlearn_torch as glt

CGROUP_V1 = '/sys/fs/cgroup/memory'

CHILD = textwrap.dedent(
  """
  import json, logging, resource, sys, time
  import numpy as np, torch
  import graphlearn_torch as glt

  logging.basicConfig(level=logging.INFO, format='%(asctime)s %(message)s')
  workdir, kind, num_parts, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
  rows = np.load(f'{workdir}/rows.npy', mmap_mode='r')
  cols = np.load(f'{workdir}/cols.npy', mmap_mode='r')
  feats = np.load(f'{workdir}/feats.npy', mmap_mode='r')
  train = torch.from_numpy(np.load(f'{workdir}/train_idx.npy'))
  cls = {'random': glt.partition.RandomPartitioner,
         'streaming': glt.partition.StreamingPartitioner}[kind]
  extra = {'balance_train': True} if kind == 'streaming' else {}
  t = time.perf_counter()
  summary = cls(out, num_parts, feats.shape[0], (rows, cols), node_feat=feats,
                node_feat_dtype=torch.float16, node_split=(train, None, None),
                progress=False, seed=1, **extra).partition()
  print(json.dumps({
    'seconds': time.perf_counter() - t,
    'peak_rss': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    'cut': summary.cut_ratio, 'node_balance': summary.node_balance(),
    'train_balance': summary.train_balance(),
  }))
  """
)


def write_inputs(args) -> None:
  path = os.path.join(args.workdir, 'train_idx.npy')
  if os.path.exists(path):
    rows = np.load(os.path.join(args.workdir, 'rows.npy'), mmap_mode='r')
    feats = np.load(os.path.join(args.workdir, 'feats.npy'), mmap_mode='r')
    if rows.shape[0] == args.edges and feats.shape[0] == args.nodes:
      return
  glt.datasets.write_community_graph(
    args.workdir, args.nodes, args.edges, num_classes=16, homophily=0.9, feature_dim=128,
    seed=args.seed,
  )  # fmt: skip


def memory_cgroup(limit_gb: float):
  """A fresh v1 memory cgroup limited to ``limit_gb`` (its directory), or
  None where none can be made."""
  path = os.path.join(CGROUP_V1, f'glt_bench_partition_{os.getpid()}')
  try:
    os.mkdir(path)
    with open(os.path.join(path, 'memory.limit_in_bytes'), 'w') as f:
      f.write(str(int(limit_gb * (1 << 30))))
  except OSError as e:
    print(f'no memory cgroup ({e}); runs are not memory-limited', flush=True)
    return None
  return path


def run_child(args, cgroup, kind: str, num_parts: int, out: str) -> dict:
  """One partitioning in a fresh process (in ``cgroup``); its log goes to
  this process's stderr."""
  argv = [sys.executable, '-c', CHILD, args.workdir, kind, str(num_parts), out]
  if cgroup:
    argv = ['sh', '-c', f'echo $$ > {cgroup}/cgroup.procs && exec "$@"', 'sh', *argv]
  done = subprocess.run(argv, stdout=subprocess.PIPE, text=True, timeout=4 * 3600)
  if done.returncode != 0:
    raise RuntimeError(f'{kind}, {num_parts} parts failed (exit {done.returncode})')
  return json.loads(done.stdout.strip().splitlines()[-1])


def measure(args, cgroup) -> list:
  rows, random_cut = [], {}
  for num_parts in args.parts:
    for kind in ('random', 'streaming'):
      out = os.path.join(args.workdir, f'out-{kind}-{num_parts}')
      shutil.rmtree(out, ignore_errors=True)
      r = run_child(args, cgroup, kind, num_parts, out)
      if num_parts not in args.keep:
        shutil.rmtree(out, ignore_errors=True)
      random_cut.setdefault(num_parts, r['cut'])
      rows.append(
        [f'{kind}, {num_parts} parts', r['seconds'], r['peak_rss'] / 1e9, 100 * r['cut'],
         r['cut'] / random_cut[num_parts], r['node_balance'], r['train_balance']]
      )  # fmt: skip
      print(rows[-1], flush=True)
  return rows


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--nodes', type=int, default=10_000_000)
  p.add_argument('--edges', type=int, default=400_000_000, help='directed edges')
  p.add_argument('--parts', type=int, nargs='+', default=[2, 4])
  p.add_argument('--keep', type=int, nargs='*', default=[4], help='partition counts kept')
  p.add_argument('--memory_limit_gb', type=float, default=12.0)
  p.add_argument('--workdir', default='.bench/partition_large')
  p.add_argument('--seed', type=int, default=0)
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_partition_large', args)
  t = time.perf_counter()
  write_inputs(args)
  print(f'inputs ready in {time.perf_counter() - t:.0f} s', flush=True)
  cgroup = memory_cgroup(args.memory_limit_gb)
  try:
    rows = measure(args, cgroup)
  finally:
    if cgroup:
      os.rmdir(cgroup)  # its processes have exited
  table = results.add(
    Table(
      'partition_large',
      f'Partitioning a community graph of {args.nodes:,} nodes and {args.edges:,} directed '
      'edges, 128-dim fp16 features',
      [
        'partitioner',
        'seconds',
        'peak RSS, GB',
        'edge cut, %',
        'vs random cut',
        'node balance',
        'train balance',
      ],
      rows,
      note='Each partitioning in a fresh process memory-mapping the input .npy files '
      f'({args.memory_limit_gb:g} GB memory cgroup); every partition written, features '
      'included. The streaming partitioner balances the training nodes too.',
    )  # fmt: skip
  )
  print(table.render())
  results.write()


if __name__ == '__main__':
  main()
