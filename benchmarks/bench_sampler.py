"""Neighbor sampling and feature gather on the CPU, beside the samplers a
user would pick instead, on an ogbn-products-size graph.

  python benchmarks/bench_sampler.py [--threads 1 2] [--batches 60] [--rounds 1] \\
      [--sizes 1 8 64] [--glt-python .venv-glt/bin/python] \\
      [--dgl-python .venv-dgl/bin/python] [--pyg-python .venv-pyg/bin/python]

Builds a seeded power-law graph with ogbn-products' size (2,449,029 nodes,
61,859,140 undirected edges stored both ways: 123,718,280; workloads.py),
then measures, in this run:
  - our NeighborSampler, fanout [15, 10, 5], batches of 1024 random seeds:
    batches/s and sampled edges/s, beside each peer given (each in its own
    environment and process, on the same graph and seed batches): GLT 0.2.4
    (glt_peer.py, ``make glt-peer``), DGL 2.1's fused sampler and GraphBolt
    (dgl_peer.py, ``make dgl-peer``), PyG's NeighborSampler on pyg-lib
    (pyg_peer.py, ``make pyg-peer``);
  - the gather of the sampled nodes' rows of a 100-dim fp32 table: ours
    beside torch.index_select (PyG's ``x[ids]``) on the same ids, and GLT's
    and GraphBolt's feature lookups;
  - sampling at each of --threads, beside as many batches sampled at once,
    each on a thread of its own alone (a loader's concurrent_batches), the
    one-hop draws alone (the
    sampled batches' hops drawn again without the inducer), the same
    batches with hash-table inducers (as on a graph over 8 M nodes) and this
    machine's independent random int64 reads/s at that thread count (how
    far its memory lets random reads scale); with --rounds R, each of these
    the best of R runs, at every thread count alike (a shared machine's
    other load slows a short run at one count and not at the next);
  - batches of each of --sizes seeds (small ones, where what a batch costs
    whatever its size decides), ours beside PyG's, at the largest thread
    count.
The peers run at the largest thread count. GLT_PYTHON, DGL_PYTHON and
PYG_PYTHON in the environment stand for the flags. Temporal sampling:
bench_temporal.py; beside busy processes: bench_contention.py.
"""

import argparse
import os

import torch
from results import Results, Table, add_results_argument
from workloads import (
  add_workload_args,
  at_once_bps,
  build_graph,
  drawn_hops,
  gather,
  hashed_inducer_bps,
  insert_bps,
  make_seed_batches,
  parallel_random_reads_per_s,
  run_peer,
  sampling,
  time_batches,
)

import graphlearn_torch as glt

PEERS = (
  ('glt', 'glt_peer.py', 'make glt-peer'),
  ('dgl', 'dgl_peer.py', 'make dgl-peer'),
  ('pyg', 'pyg_peer.py', 'make pyg-peer'),
)


def peer_rows(ds, seed_batches, sampled, args, threads: int):
  r"""``(sampling rows, gather rows)`` of every peer given: ``(library,
  configuration, batches/s, edges/s, edges per batch)`` and ``(lookup,
  rows/s)``."""
  sampling_rows, gather_rows = [], []

  def add(label: str, config: str, figures: dict) -> None:
    rates = (figures['batches_per_s'], figures['edges_per_s'], figures['edges_per_batch'])
    sampling_rows.append((label, config, *rates))

  for name, script, _ in PEERS:
    python = getattr(args, f'{name}_python')
    if not python:
      continue
    got = run_peer(script, python, ds, seed_batches, sampled, args, threads)
    where = f'torch {got["torch"]}, {got["threads"]} threads'
    if name == 'glt':
      add(f'GLT {got["glt"]}', f'NeighborSampler, seeded, {where}', got)
      gather_rows.append((f'GLT {got["glt"]} Feature', got['gather_rows_per_s']))
    elif name == 'dgl':
      config = f'{where}; every frontier node sampled again: compare edges/s'
      add(f'DGL {got["dgl"]} fused', config, got['dgl_fused'])
      add('GraphBolt', config, got['graphbolt'])
      gather_rows.append(('GraphBolt TorchBasedFeature', got['graphbolt_gather_rows_per_s']))
    else:
      label = f'PyG {got["pyg"]} + pyg-lib {got["pyg_lib"]}'
      add(label, f'NeighborSampler.sample_from_nodes, {where}', got)
  return sampling_rows, gather_rows


def sampling_table(ours, peers) -> Table:
  bps, eps, edges_pb = ours
  rows = [['graphlearn_torch', 'NeighborSampler, seeded', bps, eps, edges_pb, 1.0]]
  rows += [
    [lib, config, p_bps, p_eps, p_epb, eps / p_eps] for lib, config, p_bps, p_eps, p_epb in peers
  ]
  return Table(
    'sampling',
    'Neighbor sampling on the CPU, fanout [15, 10, 5], batches of 1024 seeds',
    ['library', 'configuration', 'batches/s', 'sampled edges/s', 'edges/batch', 'ours vs it'],
    rows,
    chart={'label': 'library', 'value': 'sampled edges/s'},
    note='Every row in one run, on the same graph and seed batches; a peer runs in its own '
    'environment and process. Compare edges/s where batches differ in size.',
  )


def gather_table(ours, index_select, peers, row_bytes: int) -> Table:
  rows = [['graphlearn_torch Feature', ours, ours * row_bytes / 1e9, 1.0]]
  rows.append(["torch.index_select (PyG's x[ids])", index_select, index_select * row_bytes / 1e9,
               ours / index_select])  # fmt: skip
  rows += [[name, r, r * row_bytes / 1e9, ours / r] for name, r in peers]
  return Table(
    'gather',
    'Feature gather on the CPU: the sampled nodes of 8 batches, 100-dim fp32 rows',
    ['lookup', 'rows/s', 'GB/s', 'ours vs it'],
    rows,
    chart={'label': 'lookup', 'value': 'rows/s'},
  )


def threads_table(scaling) -> Table:
  _, bps1, eps1, draws1, inserts1, hashed1, reads1, _ = scaling[0]
  rows = [
    [t, bps, eps, eps / eps1, at_once, at_once / bps1, draws, draws / draws1, inserts,
     inserts / inserts1, hashed, hashed / hashed1, rr, rr / reads1]
    for t, bps, eps, draws, inserts, hashed, rr, at_once in scaling
  ]  # fmt: skip
  return Table(
    'threads',
    'Our sampler by thread count, beside the one-hop draws alone and random reads',
    [
      'threads',
      'batches/s',
      'sampled edges/s',
      'vs fewest threads',
      'batches at once, batches/s',
      'at once vs fewest threads',
      'draws alone, edges/s',
      'draws vs fewest threads',
      'inducer alone, batches/s',
      'inducer vs fewest threads',
      'hashed inducer, batches/s',
      'hashed vs fewest threads',
      'random reads/s',
      'reads vs fewest threads',
    ],  # fmt: skip
    rows,
    note='Batches at once: as many batches sampled at once as there are threads, each on a '
    'thread of its own that runs its kernels alone (a loader with concurrent_batches), against '
    'one batch at a time on the fewest threads. '
    'The draws alone: the hops of the sampled batches drawn again without the inducer. '
    'The inducer alone: the hops of 8 batches, drawn once, added again and again by one '
    "id-indexed inducer (each hop's new nodes numbered in order of first appearance, every "
    "neighbor relabelled, each hop's seeds the nodes the hop before added, as in a batch): a "
    'batch without its draws. '
    'Hashed inducer: the same batches with hash-table id maps, as on a graph over 8 M nodes '
    "(this one's id-indexed maps take 4 bytes a node). "
    'Random reads: independent reads of a 1 GB int64 array at random positions on as many '
    "threads (each an index_select of its share), best of 3: how far the machine's memory lets "
    'random reads scale.',
  )


def size_rows(ds, args, threads: int) -> list:
  r"""For each of ``--sizes``: ``(seeds a batch, our batches/s, PyG's
  batches/s or None, PyG's label or None)`` on batches of that many random
  seeds, each the best of ``args.rounds`` runs; ``4096 // size`` more
  batches than ``--batches``, so that a small batch's run lasts."""
  rows = []
  for size in args.sizes:
    batches = args.batches + 4096 // size
    seeds = make_seed_batches(ds.num_nodes(), batches, size, args.seed)
    sampler = glt.sampler.NeighborSampler(
      ds.graph, args.fanout, device='cpu', edge_dir='in', seed=args.seed
    )
    ours = max(time_batches(sampler, seeds, batches)[0] for _ in range(max(1, args.rounds)))
    pyg, label = None, None
    if args.pyg_python:
      sized = argparse.Namespace(**{**vars(args), 'batches': batches})
      got = [
        run_peer('pyg_peer.py', args.pyg_python, ds, seeds, seeds, sized, threads)
        for _ in range(max(1, args.rounds))
      ]
      pyg = max(g['batches_per_s'] for g in got)
      label = f'PyG {got[0]["pyg"]} + pyg-lib {got[0]["pyg_lib"]}'
    rows.append((size, ours, pyg, label))
  return rows


def sizes_table(rows, threads: int) -> Table:
  label = next((r[3] for r in rows if r[3]), 'PyG (not run: --pyg-python)')
  return Table(
    'sizes',
    f'Small batches on the CPU, {threads} threads: batches/s by seeds a batch, '
    'fanout [15, 10, 5]',
    ['seeds a batch', 'ours, batches/s', 'ours, us a batch', f'{label}, batches/s',
     f'{label}, us a batch', 'ours vs PyG'],
    [
      [size, ours, 1e6 / ours, pyg, 1e6 / pyg if pyg else None, ours / pyg if pyg else None]
      for size, ours, pyg, _ in rows
    ],
    note='Random seeds, the same batches for both; PyG runs NeighborSampler.sample_from_nodes '
    'in its own environment and process. Where a batch has few seeds, what a batch costs '
    'whatever its size (its Python and calls) decides.',
  )  # fmt: skip


def thread_row(ds, seed_batches, args) -> tuple:
  r"""At torch's thread count: ``(threads, batches/s, edges/s, draws'
  edges/s, the inducer's alone batches/s, hashed inducer's batches/s,
  random reads/s, batches/s of as many batches at once, (edges per batch,
  the first outputs))``, each rate the best of ``args.rounds`` runs."""
  sampler = glt.sampler.NeighborSampler(
    ds.graph, args.fanout, device='cpu', edge_dir='in', seed=args.seed
  )
  hops = drawn_hops(sampler, ds.num_nodes(), seed_batches[:8], args.fanout)
  best = [0.0] * 7
  for _ in range(max(1, args.rounds)):
    bps, eps, _, edges_pb, outs, draws = sampling(
      ds, seed_batches, args.batches, args.fanout, args.seed
    )
    inserts = insert_bps(hops, ds.num_nodes(), repeat=max(1, args.batches // len(hops)))
    hashed = hashed_inducer_bps(ds, seed_batches, args.batches, args.fanout, args.seed)
    reads = parallel_random_reads_per_s(ds.graph.topo.edge_ids)
    at_once = at_once_bps(ds, seed_batches, args.batches, args.fanout, args.seed)
    rates = (bps, eps, draws, inserts, hashed, reads, at_once)
    best = [max(a, b) for a, b in zip(best, rates)]
  return (torch.get_num_threads(), *best, (edges_pb, outs))


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--threads', type=int, nargs='+', default=[1, 2])
  p.add_argument('--rounds', type=int, default=1, help='best of this many runs a thread count')
  p.add_argument(
    '--sizes', type=int, nargs='+', default=[1, 8, 64], help='seeds a batch of the sizes table'
  )
  add_workload_args(p)
  for name, _, make in PEERS:
    p.add_argument(
      f'--{name}-python',
      default=os.environ.get(f'{name.upper()}_PYTHON'),
      help=f'python of the environment `{make}` sets up: measure it in this run',
    )
  p.add_argument(
    '--tables', nargs='+', choices=['sampling', 'gather', 'threads', 'sizes'],
    default=['sampling', 'gather', 'threads', 'sizes'], help='the tables to write',
  )  # fmt: skip
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_sampler', args)
  threads = sorted(args.threads)
  torch.set_num_threads(threads[-1])
  ds, num_edges, gen_s, build_s = build_graph(args.scale, args.seed)
  print(
    f'graph: {ds.num_nodes():,} nodes, {num_edges:,} directed edges (CSR built in {build_s:.1f} s)'
  )
  seed_batches = make_seed_batches(ds.num_nodes(), args.batches, args.batch_size, args.seed)
  scaling = []
  for t in threads:
    torch.set_num_threads(t)
    row = thread_row(ds, seed_batches, args)
    scaling.append(row[:-1])
    if t == threads[-1]:
      bps, eps, edges_pb, outs = row[1], row[2], row[-1][0], row[-1][1]
  sampled = [out.node for out in outs]
  rates, row_bytes = gather(ds.num_nodes(), args.dim, sampled, repeat=3)
  peer_sampling, peer_gather = peer_rows(ds, seed_batches, sampled, args, threads[-1])
  ours = rates['graphlearn_torch gather']
  tables = [
    sampling_table((bps, eps, edges_pb), peer_sampling),
    gather_table(ours, rates['torch.index_select'], peer_gather, row_bytes),
    threads_table(scaling),
  ]
  if 'sizes' in args.tables:
    tables.append(sizes_table(size_rows(ds, args, threads[-1]), threads[-1]))
  for table in tables:
    if table.key in args.tables:
      results.add(table)
  for table in results.tables:
    print(table.render())
  results.write()


if __name__ == '__main__':
  main()
