"""Distributed sampling throughput in worker mode vs the single-machine loader.

  python benchmarks/bench_dist_sampling.py [--num_nodes 1000000] [--batches 200] [--gpu 0]
                                          [--temporal] [--glt-python .venv-glt/bin/python]
                                          [--dgl-python .venv-dgl/bin/python]

Graph: the planted-community synthetic graph (glt.datasets.community_graph,
1M nodes, about 10 directed edges per node, 32-dim features), METIS-partitioned
in 2 (cached under .bench/dist_sampling). Every loader samples fanout
[15, 10, 5] around batches of 1024 random seeds and collects features and
labels. Rows, all measured in this run:
  - single machine: glt.loader.NeighborLoader over the whole graph in one
    process (2 threads), measured before the first row and again after
    every row: this machine's speed drifts within a run (by a sixth, and
    dips briefly by a third), so each row is compared with the faster of
    the single-machine runs just before and after it (the "single beside"
    column), and the single-machine row pools them all;
  - worker mode: 2 trainer processes on this machine, one per partition, each
    with a DistNeighborLoader (collocated, then 1 and 2 sampling processes per
    trainer); throughput is both trainers' batches over the wall time;
  - the same with 2 sampling processes on partitions where each partition
    also holds the feature rows of the other's hottest nodes (--cache_ratio of
    the node count, chosen by expected reads under this fanout);
  - collocated and 1 sampling process again, with the other partition's
    feature rows over RPC (GLT_SHARE_HOST_PARTITIONS=0), as they are between
    hosts: in the other rows, partitions on one host read each other's
    feature tables from shared memory; then 1 sampling process over RPC on
    the partitions with the cache, whose cached rows need no request;
  - with --glt-python, GLT 0.2.4's worker mode (collocated, then 1 and 2
    sampling processes per trainer) in that environment (benchmarks/glt_dist_peer.py),
    on the same partitions (written in GLT's format by GLT's own save
    functions), seeds, fanout and batch size: GLT reads every other
    partition's rows over RPC, so its peers are our RPC rows. The start
    (partitions on disk to every trainer's first batch) of each of our
    worker-mode rows and of GLT's is then taken --start_rounds times, ours
    and GLT's in turn, and the start table gives the medians;
  - with --dgl-python, DGL 2.1's distributed sampling (dist_peers.py's
    dgl_loopback: DGL's own METIS partitions of the graph, a server and a
    trainer with 1 sampling process per machine, 2 machines on loopback),
    against our 1-sampler RPC row: DGL too reads the other partition over
    its RPC (root: each DGL machine gets a /dev/shm of its own).
With --gpu, every loader samples and gathers on that GPU (GPU_PLACEMENT):
the graph in GPU memory ('CUDA'), a fifth of each feature table's rows
there too (on one machine the hottest by in-degree; in a partition its
first rows, as DistDataset.load places them), the rest read through UVA;
the sampling processes get the GPU (worker_devices) and the batches arrive
on it; each trainer logs how its batches are drawn (the library's INFO).
With --temporal, every node has a time (uniform in [0, 1000), written by the
partitioner) and every loader samples by it (time_attr='node_time', each
seed at its own time, 'uniform'): the rows then compare distributed
temporal sampling with temporal sampling on one machine.
Every loader is timed after its first WARMUP batches, whose seconds are a
column of their own: they carry one-time costs (the first touch of the
sampling processes' output buffers and of the channel's memory, which this VM
backs slowly: about 1 s in worker mode), not the steady rate of later epochs.
"""

import argparse
import logging
import multiprocessing
import os
import statistics
import time
from collections import defaultdict
from typing import Callable, Optional

import numpy as np
import torch
from dist_peers import dgl_loopback, glt_worker_mode
from peer_protocol import Timed, timed
from processes import next_report
from results import Results, Table, add_results_argument

import graphlearn_torch as glt

SPAWN = multiprocessing.get_context('spawn')
FANOUT = [15, 10, 5]
BATCH = 1024
WARMUP = 20  # batches per loader before the timing starts (see the docstring)
# --gpu: where the graph and the feature rows go, on one machine and in every partition
GPU_PLACEMENT = dict(graph_mode='CUDA', split_ratio=0.2)
# The start table's pairs: (our mode, processes per trainer), (GLT's), GLT's row label.
START_PAIRS = ((('collocated', 1), ('collocated', 1), 'collocated'),
               (('mp', 1), ('mp', 1), '1 sampler'),
               (('mp', 2), ('mp', 2), '2 samplers'))  # fmt: skip
CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '.bench', 'dist_sampling')


def free_port() -> int:
  return glt.utils.get_free_port('127.0.0.1')


def make_graph(num_nodes: int):
  return glt.datasets.community_graph(num_nodes=num_nodes, avg_degree=10, seed=0)


def node_time(num_nodes: int) -> torch.Tensor:
  r"""--temporal: each node's time."""
  return torch.randint(0, 1000, (num_nodes,), generator=torch.Generator().manual_seed(1))


def partition(
  num_nodes: int, cache_ratio: float = 0.0, temporal: bool = False, partitioner: str = 'metis'
) -> str:
  r"""The graph of ``num_nodes`` in 2 partitions (``partitioner``: 'metis',
  or 'random' for graphs METIS cannot hold here), made once and kept."""
  out = os.path.join(
    CACHE,
    f'{num_nodes}-{partitioner}-2'
    + (f'-cache{cache_ratio}' if cache_ratio else '')
    + ('-temporal' if temporal else ''),
  )
  if os.path.exists(os.path.join(out, 'META.json')):
    return out
  data = make_graph(num_nodes)
  args = (out, 2, data.num_nodes, data.edge_index)
  options = dict(node_feat=data.x, node_labels=data.y, edge_assign_strategy='by_dst')
  if partitioner == 'random':
    glt.partition.RandomPartitioner(*args, seed=0, progress=False, **options).partition()
    return out
  glt.partition.MetisPartitioner(
    *args, cache_ratio=cache_ratio or None, cache_num_neighbors=FANOUT, progress=False,
    node_time=node_time(num_nodes) if temporal else None, **options,
  ).partition()  # fmt: skip
  return out


def write_graph_arrays(num_nodes: int, out: str) -> None:
  r"""The graph as ``.npy`` arrays under ``out`` (``src``, ``dst``, ``feat``,
  ``label``), for a peer that partitions it with its own partitioner."""
  data = make_graph(num_nodes)
  os.makedirs(out, exist_ok=True)
  arrays = dict(src=data.edge_index[0], dst=data.edge_index[1], feat=data.x, label=data.y)
  for name, array in arrays.items():
    np.save(os.path.join(out, f'{name}.npy'), array.numpy())


def seed_batches(num_nodes: int, count: int, seed: int):
  g = torch.Generator().manual_seed(seed)
  return torch.randint(0, num_nodes, (count * BATCH,), generator=g)


def cuda(gpu: Optional[int]) -> Optional[torch.device]:
  r"""The device of ``--gpu``, or None for the CPU."""
  return torch.device('cuda', gpu) if gpu is not None else None


def loader_options(temporal: bool) -> dict:
  r"""The sampling options every loader of the run gets."""
  return dict(time_attr='node_time') if temporal else {}


def single_machine_dataset(
  num_nodes: int, gpu: Optional[int], temporal: bool = False
) -> glt.data.Dataset:
  r"""The whole graph for the single-machine loader; with ``gpu``, on the GPU
  path (GPU_PLACEMENT)."""
  data = make_graph(num_nodes)
  ds = glt.data.Dataset(edge_dir='in')
  mode = GPU_PLACEMENT['graph_mode'] if gpu is not None else 'CPU'
  ds.init_graph(data.edge_index, graph_mode=mode, device=gpu, num_nodes=data.num_nodes)
  if gpu is None:
    ds.init_node_features(data.x, with_gpu=False)
  else:
    ds.init_node_features(
      data.x, sort_func=glt.data.sort_by_in_degree, split_ratio=GPU_PLACEMENT['split_ratio'],
      device=gpu, with_gpu=True,
    )  # fmt: skip
  ds.init_node_labels(data.y)
  if temporal:
    ds.init_node_time(node_time(num_nodes))
  return ds


def single_machine(ds: glt.data.Dataset, batches: int, gpu: Optional[int]):
  torch.set_num_threads(2)
  seeds = seed_batches(ds.num_nodes(), batches + WARMUP, 0)
  device = cuda(gpu) or torch.device('cpu')
  loader = glt.loader.NeighborLoader(
    ds, FANOUT, seeds, batch_size=BATCH, device=device,
    **loader_options(ds.node_time is not None),
  )  # fmt: skip
  return timed_loader(iter(loader), batches)


def timed_loader(it, batches: int, on_batch: Optional[Callable] = None) -> Timed:
  r"""Times ``batches`` batches of ``it`` after its first WARMUP, handing
  each batch (warm-up included) to ``on_batch`` where given."""

  def step() -> int:
    batch = next(it)
    if on_batch is not None:
      on_batch(batch)
    return batch.edge_index.size(1)

  return timed(step, WARMUP, batches)


def trainer_seeds(node_pb, rank: int, batches: int) -> torch.Tensor:
  r"""The seeds of rank ``rank``'s ``batches`` batches (after WARMUP): its
  own nodes."""
  owned = glt.partition.partition_book.owned_ids(node_pb, rank)
  return owned[seed_batches(owned.numel(), batches + WARMUP, rank) % owned.numel()]


def time_loader(data, node_pb, rank: int, options, batches: int, to_device=None, on_batch=None):
  r"""Times ``batches`` batches (after WARMUP) of a DistNeighborLoader over
  this rank's own nodes; ``data`` is None on a server-client client.
  ``on_batch``, where given, sees every batch."""
  seeds = trainer_seeds(node_pb, rank, batches)
  temporal = data is not None and data.node_time is not None
  loader = glt.distributed.DistNeighborLoader(
    data, FANOUT, seeds, batch_size=BATCH, edge_dir='in', collect_features=True,
    worker_options=options, to_device=to_device, **loader_options(temporal),
  )  # fmt: skip
  try:
    return timed_loader(iter(loader), batches, on_batch)
  finally:
    loader.shutdown()


def trainer(rank, root, mode, num_workers, ports, batches, results, share, gpu):
  os.environ['GLT_SHARE_HOST_PARTITIONS'] = '1' if share else '0'  # its samplers inherit it
  logging.basicConfig(level=logging.WARNING, format=f'[trainer {rank}] %(message)s')
  logging.getLogger('graphlearn_torch').setLevel(logging.INFO)
  torch.set_num_threads(1)
  dist = glt.distributed
  dist.init_worker_group(2, rank, 'bench')
  if mode == 'collocated':
    dist.init_rpc('127.0.0.1', ports[0], num_rpc_threads=4)
    options = None
  else:
    options = dist.MpDistSamplingWorkerOptions(
      num_workers=num_workers, worker_concurrency=4, master_addr='127.0.0.1',
      master_port=ports[1], channel_size='512MB',
      worker_devices=[cuda(gpu)] if gpu is not None else None,
    )  # fmt: skip
  if gpu is None:
    ds = dist.DistDataset(edge_dir='in').load(root, rank, graph_mode='CPU', feature_with_gpu=False)
  else:
    ds = dist.DistDataset(edge_dir='in').load(
      root, rank, feature_with_gpu=True, device=gpu, **GPU_PLACEMENT
    )
  results.put((rank, time_loader(ds, ds.node_pb, rank, options, batches, cuda(gpu))))
  if mode == 'collocated':
    dist.shutdown_rpc()


def worker_mode(
  root: str, mode: str, num_workers: int, batches: int, gpu: Optional[int], share: bool = True
):
  results = SPAWN.Queue()
  ports = (free_port(), free_port())
  args = (root, mode, num_workers, ports, batches, results, share, gpu)
  procs = [SPAWN.Process(target=trainer, args=(r, *args)) for r in range(2)]
  return run_timed(procs, results, len(procs))


def run_timed(procs, results, num_timers: int):
  r"""Starts ``procs``, waits for ``num_timers`` ``(rank, Timed)``
  reports and reaps the processes; returns the reports' batches and edges
  over the slowest one's seconds, the slowest warm-up, and the seconds from
  the start of the processes to the last first batch (start-up: the
  partitions loaded, the RPC worlds and sampling processes started)."""
  launched = time.time()
  for p in procs:
    p.start()
  try:
    deadline = time.monotonic() + 1200
    reports = [next_report(results, procs, deadline, 'no report')[1] for _ in range(num_timers)]
  finally:
    for p in procs:
      p.join(120)
      if p.is_alive():
        p.kill()
  count = sum(r.batches for r in reports)
  edges = sum(r.edges for r in reports)
  startup = max(r.first_at for r in reports) - launched
  return count, edges, max(r.seconds for r in reports), max(r.warmup for r in reports), startup


def write_trainer_seeds(root: str, work: str, batches: int) -> None:
  r"""Writes each trainer's seeds (``seeds<rank>.npy`` under ``work``), as
  glt_dist_peer.py reads them: the seeds ours gets."""
  node_pb = torch.from_numpy(np.load(os.path.join(root, 'node_pb.npy')))
  for rank in range(2):
    seeds = trainer_seeds(node_pb, rank, batches)
    np.save(os.path.join(work, f'seeds{rank}.npy'), seeds.numpy())


def our_row(mode: str, workers: int) -> str:
  r"""The name of our worker-mode row ``mode`` with ``workers`` sampling processes."""
  return (
    'worker mode, collocated'
    if mode == 'collocated'
    else f'worker mode, {workers} sampler(s)/trainer'
  )


def glt_row(label: str) -> str:
  return f'GLT 0.2.4 worker mode, {label}'


def more_starts(args, root: str) -> dict:
  r"""``--start_rounds`` - 1 more starts of each pair of START_PAIRS, ours
  and GLT's in turn: ``{row name: [seconds, ...]}``."""
  starts = defaultdict(list)
  for _ in range(args.start_rounds - 1):
    for (mode, workers), (glt_mode, glt_workers), label in START_PAIRS:
      starts[our_row(mode, workers)].append(worker_mode(root, mode, workers, 1, None)[4])
      result = glt_worker_mode(args.glt_python, root, glt_mode, 1, glt_workers)
      starts[glt_row(label)].append(result[4])
  return starts


def measure_rows(args, root: str, ds) -> tuple:
  r"""Every row of the run: ``[(label, (batches, edges, seconds, warm-up
  seconds, start seconds), single machine beside)]`` and the single
  machine's runs."""
  # The machine's speed drifts (shared host): the single machine is
  # measured before the first row and after every row, and each row is
  # compared with the faster of the runs beside it.
  singles = [single_machine(ds, args.batches, args.gpu)]
  rows = []

  def measure(label: str, result, into: Optional[list] = None) -> None:
    singles.append(single_machine(ds, args.batches, args.gpu))
    (rows if into is None else into).append((label, result, max(s[0] / s[2] for s in singles[-2:])))

  per_trainer, gpu = args.batches // 2, args.gpu
  # GLT first: its runs are the likeliest to fail, and a failure then costs
  # minutes rather than the run; its rows are listed after ours.
  glt_rows = []
  for _, (mode, workers), label in START_PAIRS if args.glt_python else ():
    result = glt_worker_mode(args.glt_python, root, mode, per_trainer, workers)
    measure(glt_row(label), result, into=glt_rows)
  for (mode, workers), _, _ in START_PAIRS:
    measure(our_row(mode, workers), worker_mode(root, mode, workers, per_trainer, gpu))
  on_rpc = [('collocated', 1, root, 'collocated, other partition on RPC'),
            ('mp', 1, root, '1 sampler, other partition on RPC')]  # fmt: skip
  if args.cache_ratio > 0:
    cached = partition(args.num_nodes, args.cache_ratio, args.temporal)
    cache = f'{args.cache_ratio:.0%} cache'
    measure(f'worker mode, 2 samplers, {cache}', worker_mode(cached, 'mp', 2, per_trainer, gpu))
    on_rpc.append(('mp', 1, cached, f'1 sampler, on RPC, {cache}'))
  for mode, workers, partitions, label in on_rpc:
    measure(label, worker_mode(partitions, mode, workers, per_trainer, gpu, False))
  if args.dgl_python:
    count, edges, seconds, _, start = dgl_loopback(args.dgl_python, args.num_nodes, per_trainer)
    measure(DGL_ROW, (count, edges, seconds, None, start), into=glt_rows)
  rows += glt_rows
  pooled = (*(sum(s[k] for s in singles) for k in range(3)), max(s[3] for s in singles), None)
  rows.insert(0, ('single machine NeighborLoader', pooled, pooled[0] / pooled[2]))
  return rows, singles


DGL_ROW = 'DGL 2.1, 1 sampler/trainer, on loopback'


def versus_glt(
  key: str, title: str, unit: str, figure: dict, pairs, note: str = '', peer: str = 'GLT'
) -> Table:
  r"""A table of our rows against ``peer``'s: ``figure`` (in ``unit``) of
  each ``(ours, peer's)`` pair of row names, and their ratio."""
  return Table(
    key, title, ['ours', peer, f'ours, {unit}', f'{peer}, {unit}', f'ours vs {peer}'],
    [[o, g, figure[o], figure[g], figure[o] / figure[g]] for o, g in pairs], note=note,
  )  # fmt: skip


def tables(args, rows, singles, more_starts: dict) -> list:
  r"""The run's tables: every row, and (with --glt-python) ours against
  GLT, the starts as the medians of each row's and ``more_starts``."""
  what = ', temporal (node time)' if args.temporal else ''
  where = f', on GPU {args.gpu}' if args.gpu is not None else ''
  runs = ' / '.join(f'{s[0] / s[2]:.2f}' for s in singles)
  out = [
    Table(
      'worker_mode',
      f'Worker mode, {args.num_nodes:,} nodes, 2 METIS partitions, 2 trainers{what}{where}',
      [
        'loader',
        'batches/s',
        'sampled edges/s',
        'single machine beside',
        'vs single',
        f'first {WARMUP} batches, s',
        'start to first batch, s',
      ],  # fmt: skip
      [[name, c / s, e / s, base, c / s / base, w, up] for name, (c, e, s, w, up), base in rows],
      chart={'label': 'loader', 'value': 'batches/s'},
      note=f'Fanout {FANOUT}, batches of {BATCH} seeds, features and labels collected. Each '
      'row against the faster single-machine run beside it (the machine drifts); the '
      f'single-machine runs, before the first row and after each: {runs} batches/s. Start '
      'to first batch: from starting the trainer processes to the last first batch (the '
      'partitions loaded from disk, the RPC worlds and the sampling processes started).',
    )
  ]
  rate = {name: c / s for name, (c, _, s, _, _), _ in rows}
  if args.dgl_python:
    title = "Our RPC row against DGL 2.1's distributed sampling (its own METIS partitions)"
    pairs = (('1 sampler, other partition on RPC', DGL_ROW),)
    out.append(versus_glt('vs_dgl', title, 'batches/s', rate, pairs, peer='DGL 2.1'))
  if args.glt_python:
    starts = {name: [up, *more_starts.get(name, [])] for name, (*_, up), _ in rows}
    startup = {name: statistics.median(runs) for name, runs in starts.items()}
    pairs = (
      ('collocated, other partition on RPC', 'GLT 0.2.4 worker mode, collocated'),
      ('1 sampler, other partition on RPC', 'GLT 0.2.4 worker mode, 1 sampler'),
    )
    start_pairs = [(our_row(*ours), glt_row(label)) for ours, _, label in START_PAIRS]
    runs = '; '.join(
      f'{o}: {" / ".join(f"{t:.2f}" for t in starts[o])} s, GLT: '
      f'{" / ".join(f"{t:.2f}" for t in starts[g])} s'
      for o, g in start_pairs
    )
    out.append(
      versus_glt(
        'vs_glt',
        "Our RPC rows against GLT 0.2.4's worker mode (GLT reads other partitions over RPC)",
        'batches/s',
        rate,
        pairs,
      )  # fmt: skip
    )
    out.append(
      versus_glt(
        'startup_vs_glt',
        "From partitions on disk to every trainer's first batch, against GLT 0.2.4",
        's',
        startup,
        start_pairs,
        note='Seconds from starting the 2 trainer processes to the later of their first '
        'batches: Python and the library imported, the partition loaded, the RPC worlds '
        'and the sampling processes started, the first batch sampled. The median of '
        f"{args.start_rounds} starts of each, ours and GLT's in turn (the first with the "
        f'throughput rows above): {runs}.',
      )  # fmt: skip
    )
  return out


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--num_nodes', type=int, default=1_000_000)
  p.add_argument('--batches', type=int, default=200, help='timed batches per loader')
  p.add_argument('--gpu', type=int, help='sample and gather on this GPU (GPU_PLACEMENT)')
  p.add_argument(
    '--cache_ratio', type=float, default=0.25,
    help="the cache rows' cached remote rows (share); 0 leaves the cache rows out",
  )  # fmt: skip
  p.add_argument('--temporal', action='store_true', help='sample by node time everywhere')
  p.add_argument(
    '--glt-python', default=None,
    help="GLT 0.2.4's environment's python: its worker mode on the same partitions",
  )  # fmt: skip
  p.add_argument(
    '--dgl-python', default=None,
    help="DGL 2.1's environment's python: its distributed sampling, 2 machines on loopback",
  )  # fmt: skip
  p.add_argument(
    '--start_rounds', type=int, default=3,
    help="with --glt-python: starts of each pair in the start table (ours and GLT's in turn)",
  )  # fmt: skip
  add_results_argument(p)
  args = p.parse_args()
  if (args.glt_python or args.dgl_python) and (args.temporal or args.gpu is not None):
    p.error('the peers run beside the CPU rows without time (GLT 0.2.4 samples by no time)')
  name = 'bench_dist_sampling' + ('_temporal' if args.temporal else '')
  results = Results(name + ('_gpu' if args.gpu is not None else ''), args)
  start = time.perf_counter()
  root = partition(args.num_nodes, temporal=args.temporal)
  print(f'partitions ready in {time.perf_counter() - start:.1f} s: {root}')
  ds = single_machine_dataset(args.num_nodes, args.gpu, args.temporal)
  rows, singles = measure_rows(args, root, ds)
  starts = more_starts(args, root) if args.glt_python else {}
  for table in tables(args, rows, singles, starts):
    print(results.add(table).render())
  results.write()


if __name__ == '__main__':
  main()
