"""Neighbor sampling and feature gather on an ogbn-products-size graph.

  python benchmarks/bench_sampler.py [--threads 1 2] [--batches 60]

Builds a seeded power-law graph with ogbn-products' size (2,449,029 nodes,
61,859,140 undirected edges stored both ways: 123,718,280), then measures:
  - CSR construction from COO;
  - NeighborSampler, fanout [15, 10, 5], batch 1024: batches/s and sampled
    edges/s, beside GLT 0.2.4's CPU build (seeded) measured on this machine
    class;
  - feature gather of the sampled nodes from a 100-dim fp32 table: our
    kernel beside torch.index_select on the same ids, measured here;
  - sampling at each of --threads, beside the one-hop draws alone (the
    sampled batches' hops drawn again with NeighborSampler.sample_one_hop,
    without the inducer) and this machine's random int64 reads/s at that
    thread count (torch.index_select of random rows of the graph's 1 GB int64
    edge-id array, as large as the neighbor array was before it became
    int32), the bound a sampled edge's one random read sets.
The comparison rows use the largest thread count.

  python benchmarks/bench_sampler.py --glt-python /path/to/glt-venv/bin/python

also measures GLT 0.2.4 in this run, on the same graph, seed batches and node
sets (benchmarks/glt_peer.py, run by that interpreter in its own process, since
both libraries import as ``graphlearn_torch``), and compares with that instead
of the dated reference. GLT_PYTHON in the environment does the same.

  python benchmarks/bench_sampler.py --dgl-python .venv-dgl/bin/python

measures DGL 2.1's fused sampler and GraphBolt (sampling and gather) the same
way (benchmarks/dgl_peer.py; ``make dgl-peer``). DGL_PYTHON does the same.

  python benchmarks/bench_sampler.py --temporal

also measures temporal sampling (issue 47): node times random and in id
order, 'uniform' and 'last', beside the non-temporal sampler in this run.

  python benchmarks/bench_sampler.py --contention [--glt-python ...]

measures the sampler and the gather (at the largest thread count) quiet,
then beside 1 and 2 busy nice-0 processes, back to back, as shares of quiet:
users share cores (GLT beside it under the same load where given, and with
--baseline-tree DIR another build of ours, e.g. a worktree of an older
commit with its extension built in place, measured through glt_peer.py). Then
trainers with collocated sampling: one alone, and two at once on this host
(their kernels capped at their share of the cores, as in a distributed job,
and not capped), each against one alone.
"""

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import time
from typing import Callable

import numpy as np
import torch

import graphlearn_torch as glt

NUM_NODES = 2_449_029
NUM_UNDIRECTED = 61_859_140
# GLT 0.2.4 built from source with WITH_CUDA=OFF, its NeighborSampler given a
# `seed` (as GLT's distributed producers do through seed_everything), on a
# products-size Chung-Lu graph, fanout [15, 10, 5], batch 1024, 2 threads:
# measured on this machine class on 2026-11-23 (issue 23), not in this run.
# Without a seed GLT's CPU kernel reads std::random_device once per seed node,
# which made the older reference (1.35 M edges/s) several times too low.
GLT_EDGES_PER_S = 6.03e6
GLT_BATCHES_PER_S = 21.9
GLT_GATHER_ROWS_PER_S = 3.52e6
GLT_LABEL = 'GLT 0.2.4 CPU, seeded (reference, 2026-11-23)'


def build_graph(scale: float, seed: int):
  num_nodes = int(NUM_NODES * scale)
  half = int(NUM_UNDIRECTED * scale)
  t = time.perf_counter()
  edges = torch.empty(2, 2 * half, dtype=torch.int64)
  glt.datasets.power_law_edges(num_nodes, half, exponent=0.5, seed=seed, out=edges[:, :half])
  edges[0, half:] = edges[1, :half]
  edges[1, half:] = edges[0, :half]
  gen_s = time.perf_counter() - t
  t = time.perf_counter()
  ds = glt.data.Dataset(edge_dir='in')
  ds.init_graph(edges, graph_mode='CPU', num_nodes=num_nodes)
  build_s = time.perf_counter() - t
  return ds, edges.size(1), gen_s, build_s


def make_seed_batches(num_nodes: int, batches: int, batch_size: int, seed: int):
  g = torch.Generator().manual_seed(seed)
  return [torch.randperm(num_nodes, generator=g)[:batch_size] for _ in range(min(batches, 8))]


def time_batches(
  sampler, seed_batches, batches: int, sync: Callable[[], None] = lambda: None, seed_times=None
):
  """``(batches/s, sampled edges/s, nodes per batch, edges per batch, the
  first 8 outputs)`` of ``batches`` batches of ``sampler`` after 3 warm-up
  ones, the seed batches taken in turn; ``sync`` waits for a device's work
  (``torch.cuda.synchronize`` for a GPU sampler); ``seed_times``: each seed
  batch's times (temporal sampling)."""

  def inputs(i):
    time = seed_times[i % len(seed_times)] if seed_times is not None else None
    return glt.sampler.NodeSamplerInput(seed_batches[i % len(seed_batches)], time=time)

  for i in range(3):  # warm-up
    sampler.sample_from_nodes(inputs(i))
  sync()
  edges = nodes = 0
  outs = []
  t = time.perf_counter()
  for i in range(batches):
    out = sampler.sample_from_nodes(inputs(i))
    edges += out.row.numel()
    nodes += out.node.numel()
    if i < 8:
      outs.append(out)
  sync()
  elapsed = time.perf_counter() - t
  return batches / elapsed, edges / elapsed, nodes / batches, edges / batches, outs


def bench_sampling(ds, seed_batches, batches: int, fanout, seed: int):
  sampler = glt.sampler.NeighborSampler(ds.graph, fanout, device='cpu', edge_dir='in', seed=seed)
  bps, eps, nodes_pb, edges_pb, outs = time_batches(sampler, seed_batches, batches)
  draws = draws_per_s(sampler, outs, fanout, repeat=max(1, batches // len(outs)))
  return bps, eps, nodes_pb, edges_pb, outs, draws


def bench_temporal(ds, seed_batches, args) -> None:
  """Temporal sampling (node-level time, PyG's semantics) beside the
  non-temporal sampler on the same graph and seeds, in sampled edges/s:
  random node times (the time-sorted copy of the topology is built) and
  node times in id order (the rows are in time order already: no copy),
  each with the seeds' times drawn uniformly over the times (half of a
  row allowed on average) and with every neighbor allowed; 'uniform' and
  'last'. Disjoint sampling without time is the second row: temporal
  sampling is disjoint, so it samples more (no node shared by two seeds)."""
  num_nodes = ds.num_nodes()
  g = torch.Generator().manual_seed(args.seed)
  random_time = torch.randint(0, num_nodes, (num_nodes,), generator=g)
  orders = {'random node times': random_time, 'node times in id order': torch.arange(num_nodes)}

  def row(name, sampler, seed_times=None, build_s=None):
    bps, eps, _, edges_pb, _ = time_batches(
      sampler, seed_batches, args.batches, seed_times=seed_times
    )
    return name, bps, eps, edges_pb, build_s

  def sampler_of(**kw):
    return glt.sampler.NeighborSampler(
      ds.graph, args.fanout, device='cpu', edge_dir='in', seed=args.seed, **kw
    )

  rows = [
    row('not temporal', sampler_of()),
    row('disjoint, not temporal', sampler_of(disjoint=True)),
  ]
  for order, node_time in orders.items():
    for strategy in ('uniform', 'last'):
      t = time.perf_counter()
      sampler = sampler_of(node_time=node_time, temporal_strategy=strategy)
      build_s = time.perf_counter() - t
      for bound, times in (
        (
          'seed times uniform',
          [torch.randint(0, num_nodes, s.shape, generator=g) for s in seed_batches],
        ),
        ('every neighbor allowed', [torch.full(s.shape, num_nodes) for s in seed_batches]),
      ):
        rows.append(row(f"'{strategy}', {order}, {bound}", sampler, times, build_s))
  base = rows[0][2]
  print(
    f'\ntemporal sampling: fanout {args.fanout}, batch {args.batch_size}, {args.batches} batches'
  )
  print(
    '| sampler | batches/s | sampled edges/s | edges/batch | vs not temporal '
    '| time-sorted copy built in |'
  )
  print('|---|--:|--:|--:|--:|--:|')
  for name, bps, eps, edges_pb, build_s in rows:
    built = f'{build_s:.1f} s' if build_s is not None else '-'
    print(
      f'| {name} | {bps:.1f} | {eps / 1e6:.2f} M | {edges_pb:,.0f} | {eps / base:.2f}x | {built} |'
    )


def draws_per_s(sampler, outs, fanout, repeat: int) -> float:
  """Sampled edges per second of the one-hop draws alone: each batch's hops
  drawn again from the nodes each hop added, with no inducer in between."""
  frontiers = []
  for out in outs:
    bounds = torch.tensor([0] + list(out.num_sampled_nodes)).cumsum(0).tolist()
    frontiers += [(out.node[bounds[h] : bounds[h + 1]], k) for h, k in enumerate(fanout)]
  sampler.sample_one_hop(*frontiers[0])
  edges = 0
  t = time.perf_counter()
  for _ in range(repeat):
    for nodes, k in frontiers:
      edges += sampler.sample_one_hop(nodes, k).nbr.numel()
  return edges / (time.perf_counter() - t)


def random_reads_per_s(table: torch.Tensor, num_reads: int = 4_000_000, seed: int = 0) -> float:
  """Random 8-byte reads per second from ``table`` (as many threads as torch has)."""
  ids = torch.randint(0, table.numel(), (num_reads,), generator=torch.Generator().manual_seed(seed))
  table.index_select(0, ids[:100_000])
  t = time.perf_counter()
  table.index_select(0, ids)
  return num_reads / (time.perf_counter() - t)


def rows_per_s(fn, id_batches, repeat: int, sync: Callable[[], None] = lambda: None) -> float:
  """Rows per second of ``fn`` (a gather) over the id batches, ``repeat``
  times, after one untimed call; ``sync`` waits for a device's work."""
  fn(id_batches[0])
  sync()
  t = time.perf_counter()
  for _ in range(repeat):
    for ids in id_batches:
      fn(ids)
  sync()
  return repeat * sum(ids.numel() for ids in id_batches) / (time.perf_counter() - t)


def bench_gather(num_nodes: int, dim: int, id_batches, repeat: int):
  table = torch.randn(num_nodes, dim)
  feat = glt.data.Feature(table, with_gpu=False)
  results = {
    'graphlearn_torch gather': rows_per_s(feat.__getitem__, id_batches, repeat),
    'torch.index_select': rows_per_s(
      lambda ids: torch.index_select(table, 0, ids), id_batches, repeat
    ),
  }
  assert torch.equal(feat[id_batches[0]], table[id_batches[0]])
  return results, dim * table.element_size()


def bench_peer(
  script: str, python: str, ds, seed_batches, sampled, args, threads: int, tree: str = ''
) -> dict:
  r"""A peer library's figures on the same graph, seeds and node sets, from
  ``benchmarks/<script>`` (glt_peer.py, dgl_peer.py) run by ``python`` (the
  peer's environment) in a process of its own; with ``tree``, our library as
  that source tree (with its built extension) has it, through glt_peer.py
  (our API is GLT's)."""
  topo = ds.graph.topo
  with tempfile.TemporaryDirectory(prefix='bench_peer_') as d:
    for name, t in (
      ('indptr', topo.indptr),
      ('indices', topo.indices),
      ('seeds', torch.stack(seed_batches)),
      ('gather_ids', torch.cat(sampled)),
      ('gather_offsets', torch.tensor([0] + [n.numel() for n in sampled]).cumsum(0)),
    ):
      np.save(f'{d}/{name}.npy', t.numpy())
    # Neither our tree nor our environment may shadow the peer's packages
    # (GLT imports as graphlearn_torch too).
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'VIRTUAL_ENV')}
    if tree:
      env['PYTHONPATH'] = os.path.abspath(tree)
    # abspath, not realpath: a venv's python must keep its own path.
    cmd = [
      os.path.abspath(python),
      os.path.join(os.path.dirname(os.path.abspath(__file__)), script),
      d,
    ]
    cmd += ['--threads', str(threads), '--batches', str(args.batches), '--dim', str(args.dim)]
    cmd += ['--seed', str(args.seed), '--fanout', *map(str, args.fanout)]
    done = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=1800)
  if done.returncode != 0:
    sys.exit(f'{script} failed ({done.returncode}):\n{done.stderr[-4000:]}')
  return json.loads(done.stdout.strip().splitlines()[-1])


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
    return bench_peer(script, python, ds, seed_batches, sampled, args, threads, tree)

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


def bench_contention(ds, seed_batches, args, threads: int, loads=(0, 1, 2)) -> None:
  r"""Sampling and gather quiet, then beside 1 and 2 busy processes, back to
  back (the peers of ``contention_peers`` beside them under the same load);
  prints each as a share of its quiet figure, and ours against each peer."""
  torch.set_num_threads(threads)
  peers = contention_peers(ds, seed_batches, args, threads)
  rows = []  # (load, [(edges/s, gather rows/s) of ours, then of each peer])
  for load in loads:
    with BusyProcesses(load):
      _, eps, _, _, outs, _ = bench_sampling(ds, seed_batches, args.batches, args.fanout, args.seed)
      sampled = [out.node for out in outs]
      gather, _ = bench_gather(ds.num_nodes(), args.dim, sampled, repeat=3)
      figures = [(eps, gather['graphlearn_torch gather'])]
      figures += [measure(sampled) for _, measure in peers]
    rows.append((load, figures))
  quiet = rows[0][1]
  print(f'\ncontention: {threads} threads, beside busy nice-0 processes (`while True: pass`)\n')
  names = ['ours'] + [name for name, _ in peers]
  print(
    '| busy processes | '
    + ' | '.join(f'{n} edges/s | vs quiet | {n} gather rows/s | vs quiet' for n in names)
    + ' |'
  )
  print('|--:|' + '--:|--:|--:|--:|' * len(names))
  for load, figures in rows:
    cells = []
    for (eps, rows_s), (q_eps, q_rows) in zip(figures, quiet):
      cells += [f'{eps / 1e6:.2f} M', f'{eps / q_eps:.0%}', f'{rows_s / 1e6:.2f} M']
      cells += [f'{rows_s / q_rows:.0%}']
    print(f'| {load} | ' + ' | '.join(cells) + ' |')
  if peers:
    print('\nours against each peer under the same load (edges/s, gather rows/s):\n')
    print('| busy processes | ' + ' | '.join(name for name, _ in peers) + ' |')
    print('|--:|' + '--:|' * len(peers))
    for load, ((eps, rows_s), *others) in rows:
      cells = [f'{eps / o_eps:.2f}x, {rows_s / o_rows:.2f}x' for o_eps, o_rows in others]
      print(f'| {load} | ' + ' | '.join(cells) + ' |')


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


def collect(results, procs, timeout: float) -> list:
  r"""One result of each of ``procs`` from ``results``; raises as soon as one
  of them dies without its result, or after ``timeout`` seconds."""
  got = []
  deadline = time.monotonic() + timeout
  while len(got) < len(procs):
    try:
      got.append(results.get(timeout=2))
    except queue.Empty:
      failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
      if failed:
        raise RuntimeError(f'a trainer process failed (exit code {failed[0]})') from None
      if time.monotonic() > deadline:
        raise TimeoutError(f'trainers gave {len(got)} of {len(procs)} results') from None
  return got


def bench_collocated_trainers(ds, seed_batches, args, threads: int) -> None:
  r"""Trainers on this host, each sampling in its own process (collocated
  sampling), run at once: one alone, then two, with their kernels capped at
  their share of the host's cores (as ``init_rpc`` caps a job's processes)
  and without a cap; prints each trainer's edges/s against one alone."""
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
      rates = collect(results, procs, timeout=900)
    finally:
      for proc in procs:
        proc.join(timeout=60)
        if proc.is_alive():
          proc.kill()
          proc.join()
    rows.append((count, min(threads, cap or threads), rates))
  alone = rows[0][2][0]
  print(f'\ncollocated trainers on this host ({glt.utils.threads.available_cores()} cores), ')
  print('each sampling in its own process at once\n')
  print('| trainers | kernel threads each | sampled edges/s each | vs one alone |')
  print('|--:|--:|--:|--:|')
  for count, kernel_threads, rates in rows:
    each = ' / '.join(f'{r / 1e6:.2f} M' for r in rates)
    share = ' / '.join(f'{r / alone:.0%}' for r in rates)
    print(f'| {count} | {kernel_threads} | {each} | {share} |')


def add_workload_args(p: argparse.ArgumentParser) -> None:
  r"""The graph, batch and feature arguments this benchmark and ab_builds.py share."""
  p.add_argument('--batches', type=int, default=60)
  p.add_argument('--batch_size', type=int, default=1024)
  p.add_argument('--fanout', type=int, nargs='+', default=[15, 10, 5])
  p.add_argument('--scale', type=float, default=1.0, help='graph size relative to products')
  p.add_argument('--dim', type=int, default=100)
  p.add_argument('--seed', type=int, default=0)


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--threads', type=int, nargs='+', default=[1, 2])
  add_workload_args(p)
  p.add_argument(
    '--glt-python',
    default=os.environ.get('GLT_PYTHON'),
    help='python of an environment with GLT 0.2.4: measure it in this run',
  )
  p.add_argument(
    '--dgl-python',
    default=os.environ.get('DGL_PYTHON'),
    help='python of an environment with DGL 2.1 (make dgl-peer): measure DGL and GraphBolt',
  )
  p.add_argument(
    '--contention',
    action='store_true',
    help='also measure beside 1 and 2 busy processes, as shares of quiet',
  )
  p.add_argument(
    '--temporal',
    action='store_true',
    help='also measure temporal sampling (node times, both strategies) beside non-temporal',
  )
  p.add_argument(
    '--baseline-tree',
    default='',
    help='with --contention: also measure our library as this source tree (built) has it',
  )
  args = p.parse_args()
  threads = sorted(args.threads)
  torch.set_num_threads(threads[-1])

  ds, num_edges, gen_s, build_s = build_graph(args.scale, args.seed)
  topo = ds.graph.topo
  print(
    f'graph: {ds.num_nodes():,} nodes, {num_edges:,} directed edges '
    f'(generated in {gen_s:.1f} s, CSR built in {build_s:.1f} s, {threads[-1]} threads); '
    f'indptr and indices {topo.indices.dtype}, '
    f'{(topo.indptr.nbytes + topo.indices.nbytes) / 2**20:,.0f} MiB'
  )
  seed_batches = make_seed_batches(ds.num_nodes(), args.batches, args.batch_size, args.seed)
  scaling = []
  for t in threads:
    torch.set_num_threads(t)
    bps, eps, nodes_pb, edges_pb, outs, draws = bench_sampling(
      ds, seed_batches, args.batches, args.fanout, args.seed
    )
    scaling.append((t, bps, eps, draws, random_reads_per_s(ds.graph.topo.edge_ids)))
  print(
    f'sampling: fanout {args.fanout}, batch {args.batch_size}, {args.batches} batches, '
    f'{nodes_pb:,.0f} nodes and {edges_pb:,.0f} edges per batch'
  )
  sampled = [out.node for out in outs]
  gather, row_bytes = bench_gather(ds.num_nodes(), args.dim, sampled, repeat=3)

  glt_bps, glt_eps, glt_gather, glt_label = (
    GLT_BATCHES_PER_S,
    GLT_EDGES_PER_S,
    GLT_GATHER_ROWS_PER_S,
    GLT_LABEL,
  )
  if args.glt_python:
    peer = bench_peer('glt_peer.py', args.glt_python, ds, seed_batches, sampled, args, threads[-1])
    glt_bps, glt_eps, glt_gather = (
      peer['batches_per_s'],
      peer['edges_per_s'],
      peer['gather_rows_per_s'],
    )
    glt_label = f'GLT {peer["glt"]} CPU, seeded (measured, torch {peer["torch"]})'
    print(
      f'GLT {peer["glt"]} (torch {peer["torch"]}, {peer["threads"]} threads): '
      f'{peer["nodes_per_batch"]:,.0f} nodes and {peer["edges_per_batch"]:,.0f} edges per batch'
    )
  rows = [
    ('sampling batches/s', bps, glt_bps, glt_label),
    ('sampled edges/s', eps, glt_eps, glt_label),
  ]
  ours = gather['graphlearn_torch gather']
  rows.append(
    ('gather rows/s', ours, gather['torch.index_select'], 'torch.index_select (measured)')
  )
  rows.append(('gather rows/s', ours, glt_gather, glt_label))
  if args.dgl_python:
    dgl = bench_peer('dgl_peer.py', args.dgl_python, ds, seed_batches, sampled, args, threads[-1])
    where = f'(measured, torch {dgl["torch"]}, {dgl["threads"]} threads)'
    for key, name in (('dgl_fused', f'DGL {dgl["dgl"]} fused'), ('graphbolt', 'GraphBolt')):
      print(
        f'{name}: {dgl[key]["edges_per_batch"]:,.0f} edges per batch (every frontier node '
        f'sampled again: compare edges/s), {dgl[key]["cores_busy"]:.2f} cores busy'
      )
      rows.append(('sampled edges/s', eps, dgl[key]['edges_per_s'], f'{name} {where}'))
      rows.append(('sampling batches/s', bps, dgl[key]['batches_per_s'], f'{name} {where}'))
    graphbolt_gather = dgl['graphbolt_gather_rows_per_s']
    rows.append(('gather rows/s', ours, graphbolt_gather, f'GraphBolt TorchBasedFeature {where}'))
  print()
  print(f'| {"metric":<20} | {"graphlearn_torch":>16} | {"peer":>12} | {"ratio":>6} | peer |')
  print(f'|{"-" * 22}|{"-" * 18}|{"-" * 14}|{"-" * 8}|------|')
  for name, value, peer, peer_name in rows:
    print(
      f'| {name:<20} | {value:>16,.1f} | {peer:>12,.1f} | {value / peer:>5.2f}x | {peer_name} |'
    )
  print(
    f'| {"gather GB/s":<20} | {ours * row_bytes / 1e9:>16.2f} | '
    f'{gather["torch.index_select"] * row_bytes / 1e9:>12.2f} | '
    f'{ours / gather["torch.index_select"]:>5.2f}x | torch.index_select (measured) |'
  )
  print()
  t1, _, eps1, draws1, reads1 = scaling[0]
  vs = f'vs {t1} thr.'
  print(
    f'| threads | batches/s | sampled edges/s | {vs} | draws alone, edges/s | {vs} '
    f'| random int64 reads/s | {vs} | edges/read |'
  )
  print('|--:|--:|--:|--:|--:|--:|--:|--:|--:|')
  for t, bps, eps, draws, reads in scaling:
    print(
      f'| {t} | {bps:.1f} | {eps / 1e6:.2f} M | {eps / eps1:.2f}x | {draws / 1e6:.2f} M | '
      f'{draws / draws1:.2f}x | {reads / 1e6:.2f} M | {reads / reads1:.2f}x | {eps / reads:.2f} |'
    )

  if args.temporal:
    bench_temporal(ds, seed_batches, args)
  if args.contention:
    bench_contention(ds, seed_batches, args, threads[-1])
    bench_collocated_trainers(ds, seed_batches, args, threads[-1])


if __name__ == '__main__':
  main()
