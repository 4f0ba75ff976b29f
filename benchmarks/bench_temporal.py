"""Temporal sampling beside the sampler without time and beside PyG's, on
an ogbn-products-size graph.

  python benchmarks/bench_temporal.py [--threads 2] [--batches 30] \\
      [--pyg-python .venv-pyg/bin/python]

The graph and seed batches of bench_sampler.py (workloads.py). Rows, all
measured in this run at --threads: our NeighborSampler without time;
disjoint without time (temporal sampling is disjoint: no node is shared by
two seeds, so it samples more); temporal by node time (PyG's semantics)
with random node times (the time-sorted copy of the topology is built) and
with node times in id order (the rows are in time order already: no copy),
each with the seeds' times drawn uniformly over the times (half of a row
allowed on average) and with every neighbor allowed, 'uniform' and 'last'.
With --pyg-python (or PYG_PYTHON), PyG's NeighborSampler on pyg-lib
(pyg_temporal_peer.py, ``make pyg-peer``) samples the same graph, seeds and
times in its own environment and process, each row beside ours.
"""

import argparse
import os
import time
from typing import Dict, List, NamedTuple, Optional

import torch
from results import Results, Table, add_results_argument
from workloads import (
  add_workload_args,
  build_graph,
  make_seed_batches,
  run_peer_script,
  time_batches,
)

import graphlearn_torch as glt

ORDERS = ('random node times', 'node times in id order')
BOUNDS = ('seed times uniform', 'every neighbor allowed')


class TimeInputs(NamedTuple):
  r"""The node times of each order in ``ORDERS`` and, for each bound in
  ``BOUNDS``, the seeds' times of every batch."""

  node_times: List[torch.Tensor]
  seed_times: List[List[torch.Tensor]]


def time_inputs(num_nodes: int, seed_batches, seed: int) -> TimeInputs:
  g = torch.Generator().manual_seed(seed)
  node_times = [torch.randint(0, num_nodes, (num_nodes,), generator=g), torch.arange(num_nodes)]
  uniform = [torch.randint(0, num_nodes, s.shape, generator=g) for s in seed_batches]
  allowed = [torch.full(s.shape, num_nodes) for s in seed_batches]
  return TimeInputs(node_times, [uniform, allowed])


def temporal_rows(ds, seed_batches, times: TimeInputs, args) -> list:
  r"""``[name, peer key, batches/s, edges/s, edges per batch, copy built in
  s]`` per sampler; the peer key names the same sampler in
  pyg_temporal_peer.py's output."""

  def row(name, key, sampler, seed_times=None, build_s=None):
    bps, eps, _, edges_pb, _ = time_batches(
      sampler, seed_batches, args.batches, seed_times=seed_times
    )
    return [name, key, bps, eps, edges_pb, build_s]

  def sampler_of(**kw):
    return glt.sampler.NeighborSampler(
      ds.graph, args.fanout, device='cpu', edge_dir='in', seed=args.seed, **kw
    )

  rows = [
    row('not temporal', 'plain', sampler_of()),
    row('disjoint, not temporal', 'disjoint', sampler_of(disjoint=True)),
  ]
  for i, (order, node_time) in enumerate(zip(ORDERS, times.node_times)):
    for strategy in ('uniform', 'last'):
      t = time.perf_counter()
      sampler = sampler_of(node_time=node_time, temporal_strategy=strategy)
      build_s = time.perf_counter() - t
      for j, (bound, seed_times) in enumerate(zip(BOUNDS, times.seed_times)):
        name = f"'{strategy}', {order}, {bound}"
        rows.append(row(name, f'{strategy} {i} {j}', sampler, seed_times, build_s))
  return rows


def pyg_samplers(python: Optional[str], ds, seed_batches, times: TimeInputs, args) -> Dict:
  r"""pyg_temporal_peer.py's figures per sampler, or {} without ``python``."""
  if not python:
    return {}
  topo = ds.graph.topo
  arrays = {'indptr': topo.indptr, 'indices': topo.indices, 'seeds': torch.stack(seed_batches)}
  for i, node_time in enumerate(times.node_times):
    arrays[f'node_time_{i}'] = node_time
  for j, seed_times in enumerate(times.seed_times):
    arrays[f'seed_time_{j}'] = torch.stack(seed_times)
  options = ['--threads', str(args.threads), '--batches', str(args.batches)]
  options += ['--seed', str(args.seed), '--fanout', *map(str, args.fanout)]
  return run_peer_script('pyg_temporal_peer.py', python, arrays, options)


def temporal_table(rows, pyg: Dict, args) -> Table:
  r"""Our rows against our sampler without time and, where PyG ran, beside
  PyG's sampler of the same key."""
  base = rows[0][3]
  columns = ['sampler', 'batches/s', 'sampled edges/s', 'edges/batch', 'vs not temporal',
             'time-sorted copy built in, s']  # fmt: skip
  if pyg:
    columns += ['PyG edges/s', 'PyG edges/batch', 'PyG built in, s', 'ours vs PyG']
  table_rows = []
  for name, key, bps, eps, epb, built in rows:
    table_row = [name, bps, eps, epb, eps / base, built]
    if pyg:
      theirs = pyg['samplers'][key]
      table_row += [theirs['edges_per_s'], theirs['edges_per_batch'], theirs.get('built_s'),
                    eps / theirs['edges_per_s']]  # fmt: skip
    table_rows.append(table_row)
  note = ''
  if pyg:
    note = (
      f'PyG {pyg["pyg"]} + pyg-lib {pyg["pyg_lib"]} (torch {pyg["torch"]}, {pyg["threads"]} '
      'threads): NeighborSampler.sample_from_nodes on the same graph, seeds and times, in its '
      "own environment and process; 'built in': its NeighborSampler's construction, which "
      "sorts each node's neighbors by time. Compare edges/s where batches differ in size."
    )
  return Table(
    'temporal',
    f'Temporal sampling by node time, {args.threads} threads, fanout {args.fanout}',
    columns,
    table_rows,
    chart={'label': 'sampler', 'value': 'sampled edges/s'},
    note=note,
  )


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--threads', type=int, default=2)
  p.add_argument(
    '--pyg-python',
    default=os.environ.get('PYG_PYTHON'),
    help='python of the environment `make pyg-peer` sets up: measure it in this run',
  )
  add_workload_args(p)
  p.set_defaults(batches=30)
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_temporal', args)
  torch.set_num_threads(args.threads)
  ds, _, _, _ = build_graph(args.scale, args.seed)
  seed_batches = make_seed_batches(ds.num_nodes(), args.batches, args.batch_size, args.seed)
  times = time_inputs(ds.num_nodes(), seed_batches, args.seed)
  rows = temporal_rows(ds, seed_batches, times, args)
  pyg = pyg_samplers(args.pyg_python, ds, seed_batches, times, args)
  table = results.add(temporal_table(rows, pyg, args))
  print(table.render())
  results.write()


if __name__ == '__main__':
  main()
