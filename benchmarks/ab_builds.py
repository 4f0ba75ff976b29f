"""A/B of two builds of graphlearn_torch: sampling and gather, quiet.

  python benchmarks/ab_builds.py BASE_TREE NEW_TREE [--rounds 4] [--scale 1.0]

Each tree is a source tree with its extension built in place (e.g. a git
worktree of an older commit, `python setup.py build_ext --inplace`). Both
are measured by the same harness, benchmarks/glt_peer.py (our API is GLT's),
in a fresh process with PYTHONPATH set to the tree, on the same graph, seed
batches and node sets as bench_sampler.py, alternating BASE and NEW for
--rounds rounds; prints each round and the medians, NEW against BASE. One
harness for both keeps the comparison free of what differs between an
in-process run and a fresh one (measured: 2-6% on this machine).
"""

import argparse
import statistics
import sys

import torch
from bench_sampler import (
  add_workload_args,
  bench_peer,
  bench_sampling,
  build_graph,
  make_seed_batches,
)


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('base_tree')
  p.add_argument('new_tree')
  p.add_argument('--rounds', type=int, default=4)
  p.add_argument('--threads', type=int, default=2)
  add_workload_args(p)
  args = p.parse_args()
  torch.set_num_threads(args.threads)
  ds, num_edges, _, _ = build_graph(args.scale, args.seed)
  seed_batches = make_seed_batches(ds.num_nodes(), args.batches, args.batch_size, args.seed)
  *_, outs, _ = bench_sampling(ds, seed_batches, 8, args.fanout, args.seed)
  sampled = [out.node for out in outs]
  print(f'graph: {ds.num_nodes():,} nodes, {num_edges:,} edges; {args.threads} threads\n')
  print('| round | tree | sampled edges/s | gather rows/s |')
  print('|--:|---|--:|--:|')
  figures = {'base': [], 'new': []}
  for r in range(1, args.rounds + 1):
    for name, tree in (('base', args.base_tree), ('new', args.new_tree)):
      got = bench_peer(
        'glt_peer.py', sys.executable, ds, seed_batches, sampled, args, args.threads, tree
      )
      figures[name].append((got['edges_per_s'], got['gather_rows_per_s']))
      print(
        f'| {r} | {name} | {got["edges_per_s"] / 1e6:.2f} M | '
        f'{got["gather_rows_per_s"] / 1e6:.2f} M |',
        flush=True,
      )
  med = {k: [statistics.median(col) for col in zip(*v)] for k, v in figures.items()}
  print(
    f'\nmedians: base {med["base"][0] / 1e6:.2f} M edges/s, {med["base"][1] / 1e6:.2f} M rows/s; '
    f'new {med["new"][0] / 1e6:.2f} M edges/s, {med["new"][1] / 1e6:.2f} M rows/s; '
    f'new/base {med["new"][0] / med["base"][0]:.3f}x edges/s, '
    f'{med["new"][1] / med["base"][1]:.3f}x rows/s'
  )


if __name__ == '__main__':
  main()
