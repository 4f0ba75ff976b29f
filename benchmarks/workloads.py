"""The workload the sampling benchmarks share: a seeded power-law graph with
ogbn-products' size, its seed batches, how a sampler and a gather are timed,
and how a peer library (run in its own environment) is handed the same
graph, seeds and node sets (peer_protocol.py)."""

import argparse
import collections
import json
import os
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np
import torch

import graphlearn_torch as glt
from graphlearn_torch._ext import ops
from graphlearn_torch.sampler.schema import RandomStream
from graphlearn_torch.utils.batch_threads import BatchThreads

# ogbn-products' size: nodes, and undirected edges (stored both ways).
NUM_NODES = 2_449_029
NUM_UNDIRECTED = 61_859_140


def add_workload_args(p: argparse.ArgumentParser) -> None:
  r"""The graph, batch and feature arguments of the sampling benchmarks."""
  p.add_argument('--batches', type=int, default=60)
  p.add_argument('--batch_size', type=int, default=1024)
  p.add_argument('--fanout', type=int, nargs='+', default=[15, 10, 5])
  p.add_argument('--scale', type=float, default=1.0, help='graph size relative to products')
  p.add_argument('--dim', type=int, default=100)
  p.add_argument('--seed', type=int, default=0)


def build_graph(scale: float, seed: int):
  r"""``(dataset, directed edges, generation s, CSR build s)``: endpoint ids
  drawn from a Zipf law (exponent 0.5), every edge stored both ways, the
  graph in CSC ('in')."""
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
  r"""Up to 8 batches of random seeds, taken in turn by the timed loops."""
  g = torch.Generator().manual_seed(seed)
  return [torch.randperm(num_nodes, generator=g)[:batch_size] for _ in range(min(batches, 8))]


def sampled_outputs(
  sampler,
  inputs: Callable[[int], 'glt.sampler.NodeSamplerInput'],
  first: int,
  count: int,
  launch_ahead: bool = False,
):
  """The outputs of batches ``first`` to ``first + count - 1`` of
  ``sampler``, batch ``i`` sampled from ``inputs(i)``; with
  ``launch_ahead`` each batch launched (``launch_from_nodes``) before the one
  before it is read, as a loader on a GPU takes them."""
  if not launch_ahead:
    for i in range(first, first + count):
      yield sampler.sample_from_nodes(inputs(i))
    return
  yield from in_order(lambda i: sampler.launch_from_nodes(inputs(i)), first, count, 2)


def in_order(launch: Callable[[int], object], first: int, count: int, depth: int):
  """``launch(i).result()`` for ``i`` from ``first`` to ``first + count -
  1`` in order, with up to ``depth`` batches launched and not read: each
  launched before the ones before it are read."""
  pending = collections.deque()
  ahead = first
  for _ in range(count):
    while ahead < first + count and len(pending) < depth:
      pending.append(launch(ahead))
      ahead += 1
    yield pending.popleft().result()


def time_batches(
  sampler,
  seed_batches,
  batches: int,
  sync: Callable[[], None] = lambda: None,
  seed_times=None,
  launch_ahead: bool = False,
):
  """``(batches/s, sampled edges/s, nodes per batch, edges per batch, the
  first 8 outputs)`` of ``batches`` batches of ``sampler`` after 4 warm-up
  ones, the seed batches taken in turn; ``sync`` waits for a device's work
  (``torch.cuda.synchronize`` for a GPU sampler); ``seed_times``: each seed
  batch's times (temporal sampling); ``launch_ahead``: each batch launched
  (``launch_from_nodes``) before the one before it is read, as a loader
  does on a GPU."""

  def inputs(i):
    time = seed_times[i % len(seed_times)] if seed_times is not None else None
    return glt.sampler.NodeSamplerInput(seed_batches[i % len(seed_batches)], time=time)

  def outputs(first: int, count: int):
    return sampled_outputs(sampler, inputs, first, count, launch_ahead)

  for _ in outputs(0, 4):  # warm-up (in launch_ahead, both inducers' CUDA graphs)
    pass
  sync()
  edges = nodes = 0
  outs = []
  t = time.perf_counter()
  for i, out in enumerate(outputs(0, batches)):
    edges += out.row.numel()
    nodes += out.node.numel()
    if i < 8:
      outs.append(out)
  sync()
  elapsed = time.perf_counter() - t
  return batches / elapsed, edges / elapsed, nodes / batches, edges / batches, outs


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


def random_reads_per_s(
  table: torch.Tensor,
  num_reads: int = 4_000_000,
  seed: int = 0,
  sync: Callable[[], None] = lambda: None,
  repeat: int = 1,
) -> float:
  """Random reads per second of ``table``'s elements (``index_select`` at
  uniform random positions, on the table's device, as many CPU threads as
  torch has), ``repeat`` times after a warm-up; ``sync`` waits for a
  device's work."""
  ids = torch.randint(0, table.numel(), (num_reads,), generator=torch.Generator().manual_seed(seed))
  ids = ids.to(table.device)
  table.index_select(0, ids[:100_000])
  sync()
  t = time.perf_counter()
  for _ in range(repeat):
    table.index_select(0, ids)
  sync()
  return repeat * num_reads / (time.perf_counter() - t)


def parallel_random_reads_per_s(
  table: torch.Tensor, num_reads: int = 4_000_000, seed: int = 0, repeat: int = 3
) -> float:
  """Random reads per second of the CPU tensor ``table``'s elements, read on
  as many threads as torch has: each thread an ``index_select`` (a plain
  loop of loads on a 1-D tensor, one thread's) of its share of uniform random
  positions; the best of ``repeat`` rounds. How far the machine's memory lets
  independent random reads scale, apart from any sampler's code."""
  ids = torch.randint(0, table.numel(), (num_reads,), generator=torch.Generator().manual_seed(seed))
  shares = ids.chunk(torch.get_num_threads())
  best = 0.0
  with ThreadPoolExecutor(len(shares)) as pool:
    list(pool.map(lambda share: table.index_select(0, share[:10_000]), shares))  # warm-up
    for _ in range(repeat):
      t = time.perf_counter()
      list(pool.map(lambda share: table.index_select(0, share), shares))
      best = max(best, num_reads / (time.perf_counter() - t))
  return best


def run_peer(
  script: str, python: str, ds, seed_batches, sampled, args, threads: int, tree: str = ''
) -> dict:
  r"""A peer library's figures on the same graph, seeds and node sets, from
  ``benchmarks/<script>`` (glt_peer.py, dgl_peer.py, pyg_peer.py) run by
  ``python`` (the peer's environment) in a process of its own; with
  ``tree``, our library as that source tree (with its built extension) has
  it, through glt_peer.py (our API is GLT's)."""
  topo = ds.graph.topo
  arrays = {
    'indptr': topo.indptr,
    'indices': topo.indices,
    'seeds': torch.stack(seed_batches),
    'gather_ids': torch.cat(sampled),
    'gather_offsets': torch.tensor([0] + [n.numel() for n in sampled]).cumsum(0),
  }
  options = ['--threads', str(threads), '--batches', str(args.batches), '--dim', str(args.dim)]
  options += ['--seed', str(args.seed), '--fanout', *map(str, args.fanout)]
  return run_peer_script(script, python, arrays, options, tree)


class PeerFailed(RuntimeError):
  r"""A peer's script ended with an error (its message: the script, how it
  ended and the end of what it wrote)."""


def run_peer_script(
  script: str, python: str, arrays: dict, options: list, pythonpath: str = ''
) -> dict:
  r"""The JSON line ``benchmarks/<script>`` prints, run by ``python`` in a
  process of its own on a directory holding ``arrays`` (name: tensor, as
  .npy files), with ``options``; ``pythonpath``: where its library is when
  it is not installed in ``python``'s environment (a source tree). Raises
  ``PeerFailed`` when the script fails."""
  with tempfile.TemporaryDirectory(prefix='bench_peer_') as d:
    for name, t in arrays.items():
      np.save(f'{d}/{name}.npy', t.numpy())
    # Neither our tree nor our environment may shadow the peer's packages
    # (GLT imports as graphlearn_torch too).
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'VIRTUAL_ENV')}
    if pythonpath:
      env['PYTHONPATH'] = os.path.abspath(pythonpath)
    env['PYTHONFAULTHANDLER'] = '1'  # a crash in the peer's C++ prints its Python stack
    # abspath, not realpath: a venv's python must keep its own path.
    cmd = [
      os.path.abspath(python),
      os.path.join(os.path.dirname(os.path.abspath(__file__)), script),
      d,
      *options,
    ]
    done = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=1800)
  if done.returncode != 0:
    how = (
      f'killed by {signal.Signals(-done.returncode).name}'
      if done.returncode < 0
      else f'exit code {done.returncode}'
    )
    raise PeerFailed(f'{script} failed ({how}):\n{done.stderr[-4000:] or done.stdout[-4000:]}')
  return json.loads(done.stdout.strip().splitlines()[-1])


def sampling(ds, seed_batches, batches: int, fanout, seed: int):
  r"""Our NeighborSampler on ``ds``: ``(batches/s, edges/s, nodes per
  batch, edges per batch, the first outputs, the draws' edges/s)``."""
  sampler = glt.sampler.NeighborSampler(ds.graph, fanout, device='cpu', edge_dir='in', seed=seed)
  bps, eps, nodes_pb, edges_pb, outs = time_batches(sampler, seed_batches, batches)
  draws = draws_per_s(sampler, outs, fanout, repeat=max(1, batches // len(outs)))
  return bps, eps, nodes_pb, edges_pb, outs, draws


def hashed_inducer_bps(ds, seed_batches, batches: int, fanout, seed: int) -> float:
  r"""Batches/s of ``sampling``'s sampler with hash-table inducers, as on a
  graph over ``DENSE_INDUCER_MAX_NODES`` (8 M) nodes, where no id-indexed
  map is made."""
  multihop = glt.sampler.multihop
  dense_max = multihop.DENSE_INDUCER_MAX_NODES
  multihop.DENSE_INDUCER_MAX_NODES = 0
  try:
    sampler = glt.sampler.NeighborSampler(ds.graph, fanout, device='cpu', edge_dir='in', seed=seed)
    return time_batches(sampler, seed_batches, batches)[0]
  finally:
    multihop.DENSE_INDUCER_MAX_NODES = dense_max


def at_once_bps(ds, seed_batches, batches: int, fanout, seed: int) -> float:
  r"""Batches/s of ``sampling``'s sampler with as many batches sampled at
  once as torch has threads, each on a thread of its own that runs its
  kernels alone (``BatchThreads``, as a loader with ``concurrent_batches``
  samples), each batch from a stream of its own, after a warm-up batch a
  thread."""
  sampler = glt.sampler.NeighborSampler(ds.graph, fanout, device='cpu', edge_dir='in', seed=seed)
  threads = BatchThreads(torch.get_num_threads())

  def launch(i: int):
    inputs = glt.sampler.NodeSamplerInput(seed_batches[i % len(seed_batches)])
    random = RandomStream.for_batch(seed, 0, i)
    return threads.launch(sampler.sample_from_nodes, inputs, random)

  try:
    for launched in [launch(i) for i in range(threads.num_threads)]:
      launched.result()
    t = time.perf_counter()
    for _ in in_order(launch, 0, batches, threads.num_threads + 1):
      pass
    return batches / (time.perf_counter() - t)
  finally:
    threads.shutdown()


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


def drawn_hops(sampler, num_nodes: int, seed_batches, fanout) -> list:
  r"""Each seed batch's hops as the inducer meets them: ``(seeds, [(frontier,
  neighbors, counts) per hop])``, each hop drawn (``sampler.sample_one_hop``)
  from the nodes the hop before added to an id-indexed inducer."""
  batches = []
  for seeds in seed_batches:
    inducer = ops.Inducer(1, [num_nodes])
    frontier = inducer.init_nodes([seeds])[0]
    hops = []
    for k in fanout:
      drawn = sampler.sample_one_hop(frontier, k)
      hops.append((frontier, drawn.nbr, drawn.nbr_num))
      frontier = inducer.induce_next([0], [0], [frontier], [drawn.nbr], [drawn.nbr_num])[0][0]
    batches.append((seeds, hops))
  return batches


def insert_bps(batches: list, num_nodes: int, repeat: int) -> float:
  r"""Batches/s of the inducer alone: ``drawn_hops``' batches added again
  and again by one id-indexed inducer (its seeds, then each hop's
  neighbors, relabelled), at torch's thread count. Each hop's seeds are the
  nodes the inducer added last (the frontier the hop was drawn from), as
  the sampler hands them on: their local ids are known without lookups."""
  inducer = ops.Inducer(1, [num_nodes])

  def add(seeds, hops, check: bool = False) -> None:
    added = inducer.init_nodes([seeds])[0]
    for frontier, nbr, nbr_num in hops:
      assert not check or torch.equal(added, frontier)
      added = inducer.induce_next([0], [0], [added], [nbr], [nbr_num])[0][0]

  add(*batches[0], check=True)
  t = time.perf_counter()
  for _ in range(repeat):
    for seeds, hops in batches:
      add(seeds, hops)
  return repeat * len(batches) / (time.perf_counter() - t)


def gather(num_nodes: int, dim: int, id_batches, repeat: int):
  r"""``({name: rows/s}, bytes per row)`` of our gather and
  ``torch.index_select`` from a random ``[num_nodes, dim]`` fp32 table."""
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
