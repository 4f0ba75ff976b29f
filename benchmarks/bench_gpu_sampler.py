"""GPU neighbor sampling beside the CPU sampler on an ogbn-products-size graph.

  python benchmarks/bench_gpu_sampler.py [--gpu 0] [--batches 100] [--scale 1.0]

The graph of bench_sampler.py (a seeded power-law graph with ogbn-products'
size: 2,449,029 nodes, 123,718,280 directed edges), built once. Every row
runs glt.sampler.NeighborSampler, fanout [15, 10, 5], on the same batches of
1024 random seeds, in this run, on this machine:
  - 'CUDA': the topology in GPU memory;
  - 'ZERO_COPY': the topology in pinned host memory, read in place by the
    GPU kernels (UVA);
  - each GPU mode again with each batch launched (``launch_from_nodes``)
    before the one before it is read, as our loaders on a GPU take them:
    the GPU draws a batch while the host finishes the one before and
    prepares the next;
  - each GPU mode again with every batch's kernels launched one by one
    (GLT_CUDA_GRAPHS=0) rather than replayed as a CUDA graph;
  - 'CPU' at 2 threads, and at every core of this machine;
  - the device's limit for each GPU mode: random reads of the topology's
    ``indices`` where that mode keeps them (one per sampled edge), by
    ``index_select`` at uniform random positions; each GPU row is reported
    as a fraction of it;
  - our NeighborLoader on the GPU over the 'CUDA' graph, a random table of
    ``--dim`` (100) fp32 columns in GPU memory (split 1.0) and random
    labels, the seed batches in order: what a training loop gets;
  - with ``--glt-gpu build/glt-gpu/pkg`` (``make glt-gpu-peer``): GLT 0.2.4's
    CUDA NeighborSampler in 'CUDA' and 'ZERO_COPY' modes, and its
    NeighborLoader as ours above, on the same graph and seeds, in a process
    of its own (benchmarks/glt_gpu_peer.py).
Ratios are to the CPU sampler at 2 threads, in sampled edges/s. The GPU
rows time whole batches, outputs on the GPU, from the first hop's launch to
the last one's end
(torch.cuda.synchronize). A machine without a GPU and the CUDA kernels
prints the CPU rows and says why the GPU rows are missing.
"""

import argparse
import os
import platform
import sys
from typing import Optional, Tuple

import torch
from peer_protocol import node_labels, time_loader
from results import Results, Table, add_results_argument
from workloads import (
  build_graph,
  make_seed_batches,
  random_reads_per_s,
  run_peer_script,
  time_batches,
)

import graphlearn_torch as glt
from graphlearn_torch.sampler.whole_batch import CUDA_GRAPHS_ENV

FANOUT = [15, 10, 5]


def gpu_graph(topo: glt.data.Topology, mode: str, gpu: int) -> Tuple[Optional[glt.data.Graph], str]:
  r"""The topology placed for GPU sampling in ``mode``, or None and why not."""
  if not torch.cuda.is_available():
    return None, 'no GPU (torch.cuda.is_available() is False)'
  graph = glt.data.Graph(topo, mode, device=gpu)
  if graph.mode != mode:
    return None, f'this build has no CUDA kernels: a {mode} graph runs as {graph.mode}'
  graph.lazy_init()  # the copy to the GPU, or the pinning, out of the timed window
  return graph, ''


def indices_reads_per_s(graph: glt.data.Graph) -> float:
  r"""Random reads per second of the graph's ``indices`` as its GPU kernels
  see them (GPU memory in 'CUDA' mode, pinned host memory read over the bus
  in 'ZERO_COPY' mode): the limit of a sampler that reads one entry per
  sampled edge."""
  indices = graph.device_topology().indices
  return random_reads_per_s(indices, 1 << 24, sync=torch.cuda.synchronize, repeat=4)


def gpu_rows(graph: glt.data.Graph, mode: str, seed_batches, args) -> list:
  r"""``(sampler, '-', time_batches(...))`` of our GPU sampler on ``graph``:
  its batches replayed as CUDA graphs, one at a time and each launched
  before the one before it is read (as our loaders on a GPU take them),
  then launched kernel by kernel."""
  rows = []
  for label, graphs, ahead in (
    (mode, '1', False),
    (f'{mode}, launched a batch ahead', '1', True),
    (f'{mode}, no CUDA graphs', '0', False),
  ):
    os.environ[CUDA_GRAPHS_ENV] = graphs
    sampler = glt.sampler.NeighborSampler(
      graph, FANOUT, device=torch.device('cuda', args.gpu), edge_dir='in', seed=args.seed
    )
    timed = time_batches(
      sampler, seed_batches, args.batches, torch.cuda.synchronize, launch_ahead=ahead
    )
    rows.append((label, '-', timed))
  del os.environ[CUDA_GRAPHS_ENV]
  return rows


def loader_row(graph: glt.data.Graph, num_nodes: int, seed_batches, args) -> tuple:
  r"""Our NeighborLoader on the GPU over ``graph`` ('CUDA'), features of
  ``args.dim`` columns in GPU memory, the seed batches in order, as
  ``glt_gpu_rows`` times GLT's: ``(name, '-', as_timed(...))``."""
  ds = glt.data.Dataset(graph=graph, edge_dir='in')
  generator = torch.Generator().manual_seed(0)  # the peer's --table-seed
  table = torch.randn(num_nodes, args.dim, generator=generator)
  ds.init_node_features(table, split_ratio=1.0, device=args.gpu)
  ds.init_node_labels(node_labels(num_nodes, 0))
  loader = glt.loader.NeighborLoader(
    ds, FANOUT, input_nodes=torch.cat(seed_batches), batch_size=args.batch_size, shuffle=False,
    device=torch.device('cuda', args.gpu),
  )  # fmt: skip
  timed = as_timed(time_loader(loader, args.batches, torch.cuda.synchronize))
  return (f"NeighborLoader, 'CUDA', {loader_note(args)}", '-', timed)


def as_timed(figures: dict) -> tuple:
  r"""A peer's or a loader's ``time_calls`` figures as ``time_batches``
  gives ours: ``(batches/s, edges/s, nodes/batch, edges/batch, None)``."""
  keys = ('batches_per_s', 'edges_per_s', 'nodes_per_batch', 'edges_per_batch')
  return (*(figures[k] for k in keys), None)


def loader_note(args) -> str:
  return f'{args.dim}-dim features in GPU memory, labels'


def describe_machine(gpu: int) -> str:
  cpu = platform.processor() or platform.machine()
  try:
    with open('/proc/cpuinfo') as f:
      cpu = next(line.split(':', 1)[1].strip() for line in f if line.startswith('model name'))
  except (OSError, StopIteration):
    pass
  text = f'{os.cpu_count()} CPU cores ({cpu}), torch {torch.__version__}'
  if torch.cuda.is_available():
    text += f', CUDA {torch.version.cuda}, GPU {gpu}: {torch.cuda.get_device_name(gpu)}'
  return text


def glt_gpu_rows(topo: glt.data.Topology, seed_batches, args) -> list:
  r"""GLT's CUDA sampler on the same graph and seeds (glt_gpu_peer.py):
  ``(sampler, '-', (batches/s, edges/s, nodes/batch, edges/batch, None))``
  per mode."""
  arrays = {'indptr': topo.indptr, 'indices': topo.indices, 'seeds': torch.stack(seed_batches)}
  options = ['--gpu', str(args.gpu), '--batches', str(args.batches), '--seed', str(args.seed)]
  options += ['--fanout', *map(str, FANOUT), '--loader', '--dim', str(args.dim)]
  got = run_peer_script('glt_gpu_peer.py', sys.executable, arrays, options, args.glt_gpu)
  rows = [(f"GLT {got['glt']}, '{mode}'", '-', as_timed(f)) for mode, f in got['sampling'].items()]
  loader = f"GLT {got['glt']} NeighborLoader, 'CUDA', {loader_note(args)}"
  return rows + [(loader, '-', as_timed(got['loading']))]


def limits_table(rows: list, limits: dict) -> Table:
  r"""Each GPU mode's sampling beside the random reads of its ``indices``."""
  body = []
  for name, _, (_, eps, _, _, _) in rows:
    mode = next(
      (m for m in limits if name in (m, f'{m}, launched a batch ahead') or name.endswith(f"'{m}'")),
      None,
    )
    if mode is not None:
      body.append([name, eps, limits[mode], eps / limits[mode]])
  return Table(
    'gpu_sampling_limits',
    "GPU sampling against the device's random reads of the topology's indices",
    ['sampler', 'sampled edges/s', 'random indices reads/s', 'fraction of the reads'],
    body,
    note="One random read of indices per sampled edge: a sampler's ceiling. The reads are "
    'index_select at uniform positions, 16 M at a time, where the mode keeps indices.',
  )


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--gpu', type=int, default=0, help='the GPU to sample on')
  p.add_argument('--batches', type=int, default=100, help='timed batches per row')
  p.add_argument('--batch_size', type=int, default=1024)
  p.add_argument('--dim', type=int, default=100, help="the loaders' feature columns")
  p.add_argument('--scale', type=float, default=1.0, help='graph size relative to products')
  p.add_argument('--seed', type=int, default=0)
  p.add_argument(
    '--glt-gpu', default='', help="GLT's package built with CUDA (make glt-gpu-peer), to run beside"
  )
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_gpu_sampler', args)
  cores = os.cpu_count() or 1
  torch.set_num_threads(cores)

  print(describe_machine(args.gpu))
  ds, num_edges, gen_s, build_s = build_graph(args.scale, args.seed)
  topo = ds.graph.topo
  print(
    f'graph: {ds.num_nodes():,} nodes, {num_edges:,} directed edges (generated in {gen_s:.1f} s, '
    f'CSC built in {build_s:.1f} s); indptr and indices {topo.indices.dtype}'
  )
  seed_batches = make_seed_batches(ds.num_nodes(), args.batches, args.batch_size, args.seed)

  rows = []  # (sampler, threads, time_batches(...))
  limits = {}  # mode -> random reads/s of its indices
  for mode in ('CUDA', 'ZERO_COPY'):
    graph, why = gpu_graph(topo, mode, args.gpu)
    if graph is None:
      print(f'{mode} row skipped: {why}')
      continue
    rows += gpu_rows(graph, mode, seed_batches, args)
    if mode == 'CUDA':
      rows.append(loader_row(graph, ds.num_nodes(), seed_batches, args))
    limits[mode] = indices_reads_per_s(graph)
  if args.glt_gpu and rows:
    rows += glt_gpu_rows(topo, seed_batches, args)
  for threads in sorted({2, cores}):
    torch.set_num_threads(threads)
    sampler = glt.sampler.NeighborSampler(
      ds.graph, FANOUT, device='cpu', edge_dir='in', seed=args.seed
    )
    rows.append(
      (f'CPU, {threads} threads', threads, time_batches(sampler, seed_batches, args.batches))
    )
  base = next(r[2][1] for r in rows if r[0] == 'CPU, 2 threads')

  table = Table(
    'gpu_sampling',
    f'Sampling on the GPU and the CPU, fanout {FANOUT}, batches of {args.batch_size} seeds',
    [
      'sampler',
      'CPU threads',
      'batches/s',
      'sampled edges/s',
      'edges/batch',
      'vs CPU, 2 threads',
    ],  # fmt: skip
    [[name, thr, bps, eps, epb, eps / base] for name, thr, (bps, eps, _, epb, _) in rows],
    chart={'label': 'sampler', 'value': 'sampled edges/s'},
    note=f'{describe_machine(args.gpu)}. The GPU rows time whole batches, outputs on the GPU.',
  )
  print(results.add(table).render())
  if limits:
    print(results.add(limits_table(rows, limits)).render())
  results.write()


if __name__ == '__main__':
  main()
