"""A/B of two builds of graphlearn_torch: sampling and gather, quiet.

  python benchmarks/ab_builds.py BASE_TREE NEW_TREE [--rounds 4] [--scale 1.0]

Each tree is a source tree with its extension built in place (e.g. a git
worktree of an older commit, `python setup.py build_ext --inplace`). Both
are measured by the same harness, benchmarks/glt_peer.py (our API is GLT's),
in a fresh process with PYTHONPATH set to the tree, on the same graph, seed
batches and node sets as bench_sampler.py, for --rounds rounds of both
(base first in odd rounds, new first in even ones); prints each round and
the medians, NEW against BASE. One harness for both keeps the comparison
free of what differs between an in-process run and a fresh one (measured:
2-6% on this machine).
"""

import argparse
import statistics
import sys

import torch
from results import Results, Table, add_results_argument
from workloads import add_workload_args, build_graph, make_seed_batches, run_peer, sampling


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('base_tree')
  p.add_argument('new_tree')
  p.add_argument('--rounds', type=int, default=4)
  p.add_argument('--threads', type=int, default=2)
  add_workload_args(p)
  add_results_argument(p)
  args = p.parse_args()
  results = Results('ab_builds', args)
  torch.set_num_threads(args.threads)
  ds, num_edges, _, _ = build_graph(args.scale, args.seed)
  seed_batches = make_seed_batches(ds.num_nodes(), args.batches, args.batch_size, args.seed)
  *_, outs, _ = sampling(ds, seed_batches, 8, args.fanout, args.seed)
  sampled = [out.node for out in outs]
  print(f'graph: {ds.num_nodes():,} nodes, {num_edges:,} edges; {args.threads} threads\n')
  figures = {'base': [], 'new': []}
  rows = []
  trees = (('base', args.base_tree), ('new', args.new_tree))
  for r in range(1, args.rounds + 1):
    # Base first in odd rounds, new first in even ones: neither tree always
    # runs right after the other's process freed its memory.
    for name, tree in trees if r % 2 else trees[::-1]:
      got = run_peer(
        'glt_peer.py', sys.executable, ds, seed_batches, sampled, args, args.threads, tree
      )
      figures[name].append((got['edges_per_s'], got['gather_rows_per_s']))
      rows.append([r, name, got['edges_per_s'], got['gather_rows_per_s']])
      print(f'round {r}, {name}: {got["edges_per_s"] / 1e6:.2f} M edges/s', flush=True)
  med = {k: [statistics.median(col) for col in zip(*v)] for k, v in figures.items()}
  for name in ('base', 'new'):
    rows.append(['median', name, *med[name]])
  rows.append(['new vs base', '', med['new'][0] / med['base'][0], med['new'][1] / med['base'][1]])
  table = results.add(
    Table(
      'ab',
      f'Two builds through one harness: {args.base_tree} (base), {args.new_tree} (new)',
      ['round', 'tree', 'sampled edges/s', 'gather rows/s'],
      rows,
    )
  )
  print(table.render())
  results.write()


if __name__ == '__main__':
  main()
