"""Temporal sampling beside the sampler without time, on an
ogbn-products-size graph.

  python benchmarks/bench_temporal.py [--threads 2] [--batches 30]

The graph and seed batches of bench_sampler.py (workloads.py). Rows, all
measured in this run at --threads: our NeighborSampler without time;
disjoint without time (temporal sampling is disjoint: no node is shared by
two seeds, so it samples more); temporal by node time (PyG's semantics)
with random node times (the time-sorted copy of the topology is built) and
with node times in id order (the rows are in time order already: no copy),
each with the seeds' times drawn uniformly over the times (half of a row
allowed on average) and with every neighbor allowed, 'uniform' and 'last'.
"""

import argparse
import time

import torch
from results import Results, Table, add_results_argument
from workloads import add_workload_args, build_graph, make_seed_batches, time_batches

import graphlearn_torch as glt


def temporal_rows(ds, seed_batches, args) -> list:
  r"""``[name, batches/s, edges/s, edges per batch, copy built in s]`` per
  sampler."""
  num_nodes = ds.num_nodes()
  g = torch.Generator().manual_seed(args.seed)
  orders = {
    'random node times': torch.randint(0, num_nodes, (num_nodes,), generator=g),
    'node times in id order': torch.arange(num_nodes),
  }

  def row(name, sampler, seed_times=None, build_s=None):
    bps, eps, _, edges_pb, _ = time_batches(
      sampler, seed_batches, args.batches, seed_times=seed_times
    )
    return [name, bps, eps, edges_pb, build_s]

  def sampler_of(**kw):
    return glt.sampler.NeighborSampler(
      ds.graph, args.fanout, device='cpu', edge_dir='in', seed=args.seed, **kw
    )

  rows = [
    row('not temporal', sampler_of()),
    row('disjoint, not temporal', sampler_of(disjoint=True)),
  ]
  bounds = (
    (
      'seed times uniform',
      [torch.randint(0, num_nodes, s.shape, generator=g) for s in seed_batches],
    ),
    ('every neighbor allowed', [torch.full(s.shape, num_nodes) for s in seed_batches]),
  )
  for order, node_time in orders.items():
    for strategy in ('uniform', 'last'):
      t = time.perf_counter()
      sampler = sampler_of(node_time=node_time, temporal_strategy=strategy)
      build_s = time.perf_counter() - t
      for bound, times in bounds:
        rows.append(row(f"'{strategy}', {order}, {bound}", sampler, times, build_s))
  return rows


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--threads', type=int, default=2)
  add_workload_args(p)
  p.set_defaults(batches=30)
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_temporal', args)
  torch.set_num_threads(args.threads)
  ds, _, _, _ = build_graph(args.scale, args.seed)
  seed_batches = make_seed_batches(ds.num_nodes(), args.batches, args.batch_size, args.seed)
  rows = temporal_rows(ds, seed_batches, args)
  base = rows[0][2]
  table = results.add(
    Table(
      'temporal',
      f'Temporal sampling by node time, {args.threads} threads, fanout {args.fanout}',
      [
        'sampler',
        'batches/s',
        'sampled edges/s',
        'edges/batch',
        'vs not temporal',
        'time-sorted copy built in, s',
      ],  # fmt: skip
      [[name, bps, eps, epb, eps / base, built] for name, bps, eps, epb, built in rows],
      chart={'label': 'sampler', 'value': 'sampled edges/s'},
    )
  )
  print(table.render())
  results.write()


if __name__ == '__main__':
  main()
