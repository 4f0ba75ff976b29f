"""Our CPU sampler and gather where users share cores: beside busy
processes, and as the collocated samplers of several trainers on one host.

  python benchmarks/bench_contention.py [--threads 2] [--glt-python ...] \\
      [--dgl-python ...] [--baseline-tree DIR]

The graph and batches of bench_sampler.py (workloads.py). Measured in this
run: the sampler and the gather (at --threads) quiet, then beside 1 and 2
busy nice-0 processes (``while True: pass``), back to back, as shares of
quiet; GLT and DGL/GraphBolt beside it under the same load where given, and
with --baseline-tree another build of ours (a source tree with its
extension built in place, measured through glt_peer.py). Then trainers with
collocated sampling: one alone, and two at once on this host, their kernels
capped at their share of the cores (as in a distributed job) and not
capped, each against one alone.
"""

import argparse
import os
import subprocess
import sys

import torch
from processes import all_reports
from results import Results, Table, add_results_argument
from workloads import (
  add_workload_args,
  build_graph,
  gather,
  make_seed_batches,
  run_peer,
  sampling,
  time_batches,
)

import graphlearn_torch as glt


class BusyProcesses:
  r"""``count`` busy-looping Python processes at nice 0 (other users' work on
  a shared machine), started on entry and killed and reaped on exit; the
  timed code's warm-up batches give them time to start."""

  def __init__(self, count: int):
    self.count = count
    self.procs = []

  def __enter__(self) -> 'BusyProcesses':
    code = 'while True: pass'
    self.procs = [subprocess.Popen([sys.executable, '-c', code]) for _ in range(self.count)]
    return self

  def __exit__(self, *exc) -> None:
    for proc in self.procs:
      proc.kill()
    for proc in self.procs:
      proc.wait(timeout=30)


def contention_peers(ds, seed_batches, args, threads: int) -> list:
  r"""``(name, measure)`` of each library measured beside ours under
  --contention; ``measure(sampled)`` gives its ``(edges/s, gather rows/s)``:
  GLT, DGL (the faster of its fused sampler and GraphBolt, GraphBolt's
  gather) and our baseline build, where given."""
  peers = []

  def run(script, python, sampled, tree=''):
    return run_peer(script, python, ds, seed_batches, sampled, args, threads, tree)

  if args.glt_python:

    def glt_peer(sampled):
      r = run('glt_peer.py', args.glt_python, sampled)
      return r['edges_per_s'], r['gather_rows_per_s']

    peers.append(('GLT', glt_peer))
  if args.dgl_python:

    def dgl_peer(sampled):
      r = run('dgl_peer.py', args.dgl_python, sampled)
      eps = max(r['dgl_fused']['edges_per_s'], r['graphbolt']['edges_per_s'])
      return eps, r['graphbolt_gather_rows_per_s']

    peers.append(('DGL/GraphBolt best', dgl_peer))
  if args.baseline_tree:

    def baseline(sampled):
      r = run('glt_peer.py', sys.executable, sampled, args.baseline_tree)
      return r['edges_per_s'], r['gather_rows_per_s']

    peers.append(('baseline', baseline))
  return peers


def contention_table(ds, seed_batches, args, threads: int, loads=(0, 1, 2)) -> Table:
  r"""Sampling and gather quiet, then beside 1 and 2 busy processes, back to
  back (the peers of ``contention_peers`` beside them under the same load),
  each as a share of its quiet figure."""
  torch.set_num_threads(threads)
  peers = contention_peers(ds, seed_batches, args, threads)
  rows = []  # (load, [(edges/s, gather rows/s) of ours, then of each peer])
  for load in loads:
    with BusyProcesses(load):
      _, eps, _, _, outs, _ = sampling(ds, seed_batches, args.batches, args.fanout, args.seed)
      sampled = [out.node for out in outs]
      rates, _ = gather(ds.num_nodes(), args.dim, sampled, repeat=3)
      figures = [(eps, rates['graphlearn_torch gather'])]
      figures += [measure(sampled) for _, measure in peers]
    rows.append((load, figures))
  quiet = rows[0][1]
  names = ['ours'] + [name for name, _ in peers]
  columns = ['busy processes']
  for n in names:
    columns += [f'{n} edges/s', 'vs quiet', f'{n} gather rows/s', 'vs quiet']
  table_rows = []
  for load, figures in rows:
    cells = [load]
    for (eps, rows_s), (q_eps, q_rows) in zip(figures, quiet):
      cells += [eps, eps / q_eps, rows_s, rows_s / q_rows]
    table_rows.append(cells)
  return Table(
    'contention',
    f'Sampling and gather beside busy processes, {threads} threads',
    columns,
    table_rows,
    note='Busy processes: `while True: pass` at nice 0. Each library against its own quiet row.',
  )


def trainer_sampling(topology, num_nodes, seed_batches, args, threads, cap, ready, results):
  r"""One trainer's collocated sampling (spawned): ``NeighborSampler`` over
  the shared topology in this process, torch at ``threads`` threads, the
  kernels capped at ``cap`` (None: no cap); puts its sampled edges/s on
  ``results`` once every trainer is ready."""
  torch.set_num_threads(threads)
  glt.utils.set_kernel_threads(cap)
  ds = glt.data.Dataset(edge_dir='in')
  ds.init_graph(topology, layout='CSC', graph_mode='CPU', num_nodes=num_nodes)
  sampler = glt.sampler.NeighborSampler(
    ds.graph, args.fanout, device='cpu', edge_dir='in', seed=args.seed
  )
  ready.wait(timeout=600)  # the trainers start timing together
  _, eps, _, _, _ = time_batches(sampler, seed_batches, args.batches)
  results.put(eps)


def collocated_table(ds, seed_batches, args, threads: int) -> Table:
  r"""Trainers on this host, each sampling in its own process (collocated
  sampling), run at once: one alone, then two, with their kernels capped at
  their share of the host's cores (as ``init_rpc`` caps a job's processes)
  and without a cap; each trainer's edges/s against one alone."""
  ctx = torch.multiprocessing.get_context('spawn')
  topo = ds.graph.topo
  topology = (topo.indices.share_memory_(), topo.indptr.share_memory_())  # GLT's CSC order
  rows = []
  for count, capped in ((1, True), (2, True), (2, False)):
    cap = glt.utils.threads.host_share(count) if capped else None
    ready, results = ctx.Barrier(count), ctx.Queue()
    procs = [
      ctx.Process(
        target=trainer_sampling,
        args=(topology, ds.num_nodes(), seed_batches, args, threads, cap, ready, results),
      )
      for _ in range(count)
    ]
    for proc in procs:
      proc.start()
    try:
      rates = all_reports(results, procs, 900, 'a trainer gave no result')
    finally:
      for proc in procs:
        proc.join(timeout=60)
        if proc.is_alive():
          proc.kill()
          proc.join()
    rows.append((count, min(threads, cap or threads), rates))
  alone = rows[0][2][0]
  return Table(
    'collocated',
    f'Trainers sampling at once on this host ({glt.utils.threads.available_cores()} cores)',
    ['trainers', 'kernel threads each', 'slowest trainer, edges/s', 'vs one alone'],
    [[count, kthreads, min(rates), min(rates) / alone] for count, kthreads, rates in rows],
  )


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--threads', type=int, default=2)
  add_workload_args(p)
  for name in ('glt', 'dgl'):
    p.add_argument(f'--{name}-python', default=os.environ.get(f'{name.upper()}_PYTHON'))
  p.add_argument('--baseline-tree', default='', help='also measure our library as this tree has it')
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_contention', args)
  torch.set_num_threads(args.threads)
  ds, _, _, _ = build_graph(args.scale, args.seed)
  seed_batches = make_seed_batches(ds.num_nodes(), args.batches, args.batch_size, args.seed)
  results.add(contention_table(ds, seed_batches, args, args.threads))
  results.add(collocated_table(ds, seed_batches, args, args.threads))
  for table in results.tables:
    print(table.render())
  results.write()


if __name__ == '__main__':
  main()
