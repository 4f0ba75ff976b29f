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

  python benchmarks/bench_sampler.py --contention [--glt-python ...]

measures the sampler and the gather (at the largest thread count) quiet,
then beside 1 and 2 busy nice-0 processes, back to back, as shares of quiet:
users share cores (GLT beside it under the same load where given).
"""

import argparse
import json
import os
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


def time_batches(sampler, seed_batches, batches: int, sync: Callable[[], None] = lambda: None):
  """``(batches/s, sampled edges/s, nodes per batch, edges per batch, the
  first 8 outputs)`` of ``batches`` batches of ``sampler`` after 3 warm-up
  ones, the seed batches taken in turn; ``sync`` waits for a device's work
  (``torch.cuda.synchronize`` for a GPU sampler)."""
  for s in seed_batches[:3]:  # warm-up
    sampler.sample_from_nodes(glt.sampler.NodeSamplerInput(s))
  sync()
  edges = nodes = 0
  outs = []
  t = time.perf_counter()
  for i in range(batches):
    seeds = seed_batches[i % len(seed_batches)]
    out = sampler.sample_from_nodes(glt.sampler.NodeSamplerInput(seeds))
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


def bench_peer(script: str, python: str, ds, seed_batches, sampled, args, threads: int) -> dict:
  r"""A peer library's figures on the same graph, seeds and node sets, from
  ``benchmarks/<script>`` (glt_peer.py, dgl_peer.py) run by ``python`` (the
  peer's environment) in a process of its own."""
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


def bench_contention(ds, seed_batches, args, threads: int, loads=(0, 1, 2)) -> None:
  r"""Sampling and gather quiet, then beside 1 and 2 busy processes, back to
  back (GLT beside them where ``--glt-python`` is given); prints each as a
  share of its quiet figure."""
  torch.set_num_threads(threads)
  rows = []
  for load in loads:
    with BusyProcesses(load):
      _, eps, _, _, outs, _ = bench_sampling(ds, seed_batches, args.batches, args.fanout, args.seed)
      sampled = [out.node for out in outs]
      gather, _ = bench_gather(ds.num_nodes(), args.dim, sampled, repeat=3)
      peer = None
      if args.glt_python:
        peer = bench_peer('glt_peer.py', args.glt_python, ds, seed_batches, sampled, args, threads)
    rows.append((load, eps, gather['graphlearn_torch gather'], peer))
  quiet = rows[0]
  print(f'\ncontention: {threads} threads, beside busy nice-0 processes (`while True: pass`)\n')
  head = '| busy processes | sampled edges/s | vs quiet | gather rows/s | vs quiet |'
  print(
    head + (' GLT edges/s | vs quiet | GLT gather rows/s | vs quiet |' if args.glt_python else '')
  )
  print('|--:|--:|--:|--:|--:|' + ('--:|--:|--:|--:|' if args.glt_python else ''))
  for load, eps, rows_s, peer in rows:
    line = (
      f'| {load} | {eps / 1e6:.2f} M | {eps / quiet[1]:.0%} | {rows_s / 1e6:.2f} M | '
      f'{rows_s / quiet[2]:.0%} |'
    )
    if peer is not None:
      q = quiet[3]
      line += (
        f' {peer["edges_per_s"] / 1e6:.2f} M | {peer["edges_per_s"] / q["edges_per_s"]:.0%} | '
        f'{peer["gather_rows_per_s"] / 1e6:.2f} M | '
        f'{peer["gather_rows_per_s"] / q["gather_rows_per_s"]:.0%} |'
      )
    print(line)


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--threads', type=int, nargs='+', default=[1, 2])
  p.add_argument('--batches', type=int, default=60)
  p.add_argument('--batch_size', type=int, default=1024)
  p.add_argument('--fanout', type=int, nargs='+', default=[15, 10, 5])
  p.add_argument('--scale', type=float, default=1.0, help='graph size relative to products')
  p.add_argument('--dim', type=int, default=100)
  p.add_argument('--seed', type=int, default=0)
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

  if args.contention:
    bench_contention(ds, seed_batches, args, threads[-1])


if __name__ == '__main__':
  main()
