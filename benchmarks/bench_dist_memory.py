"""Host and GPU memory of worker mode as trainers per host grow.

  python benchmarks/bench_dist_memory.py [--num_nodes 1000000] [--batches 30] [--rounds 3]
      [--gpu 0] [--modes CPU ZERO_COPY CUDA]

bench_dist_sampling.py's graph and its 2 METIS partitions, both held on this
host. A launcher process loads each partition once and starts the trainers
that hold it with it, as GLT's examples do (the dataset handed to the
processes it starts: DistDataset's pickling shares the graph and maps the
feature files again, so no process holds a copy of its own): forked from
the fork server glt.utils.spawn starts them from, and (``--start_methods``)
spawned, each a fresh interpreter, as torch.multiprocessing.spawn starts
them. Each trainer
samples fanout [15, 10, 5] around batches of 1024 of its partition's nodes
in worker mode, features collected. Jobs, per partition:
  - 1 trainer with 1 sampling process;
  - 2 trainers with 2 sampling processes each.
Each trainer keeps the batch it has while it waits for the next, as a
training loop keeps the one it trains on. After every trainer has taken its
warm-up and ``--batches`` batches (the loaders still running), the launcher
sums the PSS of every process of the
job (launcher, trainers, sampling processes) by what the pages hold
(benchmarks/memory.py): the shared tables (the topologies and any tables in
shared memory), the partitions' memory-mapped feature files, the
shared-memory channels (each trainer's own, backed as batches pass), the GPU
driver's mappings (pinned allocations), and each process's own memory (the
interpreter, torch, buffers). Beside each job, its floor: the tables and what
as many bare processes hold (a spawned one that imported torch and this
library, the same once it has imported PyG too, and a process forked from
the first, each doing nothing): one with PyG for each trainer (its loader
imports PyG, whose Data its batches become), a plain one for each other
process that started an interpreter of its own and a forked one for each
forked process; and the floor with the batches in flight: one a trainer
(the one it trains on) and one a sampling process (the one it writes), of
the trainers' mean batch size. With ``--gpu`` the same jobs run in 'ZERO_COPY'
and 'CUDA' modes (a fifth of each feature table in GPU memory), the launcher
placing each partition on the GPU before it starts the trainers (the
trainers of a partition and their sampling processes read that one copy),
and the GPU memory in use on the device is taken before the launcher loads
the partitions and at the measurement: the difference is the job's, the
launcher's CUDA context included. Each job's PSS by role (the launcher, the
trainers, the processes under them, the rest) and kind is printed as it is
measured.
"""

import argparse
import collections
import multiprocessing
import os
import time
from typing import NamedTuple, Optional

import psutil
import torch
from bench_dist_sampling import (
  BATCH,
  FANOUT,
  SPAWN,
  WARMUP,
  free_port,
  partition,
  seed_batches,
)
from memory import fresh_interpreters, process_pss_mb, tree_pids, tree_pss_mb
from processes import next_report
from results import Results, Table, add_results_argument

import graphlearn_torch as glt
from graphlearn_torch.batch.pyg import import_pyg

JOBS = ((1, 1), (2, 2))  # (trainers per partition, sampling processes per trainer)
STARTS = {
  'forkserver': 'forked (glt.utils.spawn)',
  'spawn': 'spawned (torch.multiprocessing.spawn)',
}  # how the launcher starts its trainers
NUM_PARTITIONS = 2
WAIT_S = 900  # for any one trainer's report


class BareProcesses(NamedTuple):
  r"""PSS in MB of processes that do nothing (``bare_process``)."""

  alone: collections.Counter  # by kind: imported torch and this library
  forked: float  # what a process forked from that one adds
  with_pyg: collections.Counter  # by kind: also imported PyG


def load_partition(root: str, part: int, mode: str, gpu: Optional[int]):
  r"""Partition ``part`` in graph mode ``mode`` (a fifth of the feature rows
  in GPU ``gpu``'s memory in the GPU modes)."""
  ds = glt.distributed.DistDataset(edge_dir='in')
  if mode == 'CPU':
    return ds.load(root, part, graph_mode='CPU', feature_with_gpu=False)
  return ds.load(root, part, graph_mode=mode, feature_with_gpu=True, device=gpu, split_ratio=0.2)


def trainer_seeds(ds, rank: int, batches: int) -> torch.Tensor:
  r"""Trainer ``rank``'s seeds, ``batches`` batches of its partition's nodes:
  the trainer holds these only, as a training script holds its share of the
  training ids (not the partition's every id: 8 bytes a node)."""
  owned = glt.partition.partition_book.owned_ids(ds.node_pb, ds.partition_idx)
  return owned[seed_batches(owned.numel(), batches, rank) % owned.numel()]


def trainer(rank, world, ds, samplers, batches, port, gpu, ready, measured):
  r"""A trainer on ``ds``'s partition: ``WARMUP + batches`` batches, each
  kept while the next is sampled (as a training loop keeps the batch it
  trains on), a report of its batches' mean MB in host memory on ``ready``, then its loader
  kept running, and its last batch kept, until ``measured`` is set."""
  torch.set_num_threads(1)
  dist = glt.distributed
  dist.init_worker_group(world, rank, 'memory')
  device = torch.device('cuda', gpu) if gpu is not None else None
  options = dist.MpDistSamplingWorkerOptions(
    num_workers=samplers, worker_concurrency=4, master_addr='127.0.0.1', master_port=port,
    channel_size='256MB', worker_devices=[device] if device is not None else None,
  )  # fmt: skip
  seeds = trainer_seeds(ds, rank, WARMUP + batches)
  loader = dist.DistNeighborLoader(
    ds, FANOUT, seeds, batch_size=BATCH, edge_dir='in', collect_features=True,
    worker_options=options, to_device=device,
  )  # fmt: skip
  try:
    batch_iter = iter(loader)
    batch_bytes = 0
    for _ in range(WARMUP + batches):
      batch = next(batch_iter)
      batch_bytes += sum(  # in host memory (a GPU's batches come through the GPU)
        v.numel() * v.element_size() for _, v in batch if torch.is_tensor(v) and not v.is_cuda
      )
    ready.put(batch_bytes / (WARMUP + batches) / 2**20)
    measured.wait(WAIT_S)
  finally:
    loader.shutdown()


def gpu_used_mb(gpu: Optional[int]) -> Optional[float]:
  r"""Memory in use on GPU ``gpu`` (every process's), in MB."""
  if gpu is None:
    return None
  free, total = torch.cuda.mem_get_info(gpu)
  return (total - free) / 2**20


def trainer_context(start_method: str):
  r"""Where the launcher starts its trainers: forked from the fork server
  ``glt.utils.spawn`` starts them from ('forkserver'), or each a fresh
  interpreter (torch.multiprocessing.spawn's, GLT's examples')."""
  if start_method == 'spawn':
    return SPAWN
  return glt.utils.trainer_process_context(__name__)


def launcher(root, mode, gpu, per_partition, samplers, batches, start_method, out):
  r"""One job: loads each partition once, starts its ``per_partition``
  trainers with it (``trainer_context(start_method)``), and puts ``(PSS by
  kind, processes, how many of them are fresh interpreters, GPU MB, the
  trainers' mean batch MB)`` on ``out`` once every trainer is at its last
  batch."""
  gpu_before = gpu_used_mb(gpu)
  datasets = [load_partition(root, p, mode, gpu) for p in range(NUM_PARTITIONS)]
  if mode != 'CPU':
    for ds in datasets:  # once here: the trainers and their sampling processes read this copy
      ds.place_on_gpu(gpu)
  ctx = trainer_context(start_method)
  ready, measured = ctx.Queue(), ctx.Event()
  world, port = NUM_PARTITIONS * per_partition, free_port()
  procs = []
  sample_on = None if mode == 'CPU' else gpu  # the 'CPU' job samples on the CPU, as without a GPU
  for rank in range(world):
    args = (rank, world, datasets[rank // per_partition], samplers, batches, port, sample_on)
    name = f'trainer {rank}'
    procs.append(ctx.Process(target=trainer, args=(*args, ready, measured), name=name))
  for p in procs:
    p.start()
  try:
    deadline = time.monotonic() + WAIT_S
    batch_mb = [next_report(ready, procs, deadline, 'a trainer gave no report') for _ in procs]
    pss, count = tree_pss_mb(files_under=os.path.realpath(root))
    log_roles(os.path.realpath(root), {p.pid for p in procs})
    fresh = fresh_interpreters(tree_pids())
    gpu_mb = None if gpu is None else gpu_used_mb(gpu) - gpu_before
    out.put((pss, count, fresh, gpu_mb, sum(batch_mb) / len(batch_mb)))
  finally:
    measured.set()
    for p in procs:
      p.join(120)
      if p.is_alive():
        p.kill()


def log_roles(files_under: str, trainers: set) -> None:
  r"""Prints this job's PSS by role (the launcher, the trainers, the
  processes under them: their sampling processes, and on a GPU host the fork
  servers those come from; the rest: the trainers' fork server) and kind, in
  MB: where a job's memory goes (a GPU mode's driver mappings among them)."""
  roles = collections.defaultdict(collections.Counter)
  for pid in tree_pids():
    try:
      above = {p.pid for p in psutil.Process(pid).parents()}
      role = (
        'launcher' if pid == os.getpid() else 'trainers' if pid in trainers
        else 'under the trainers' if above & trainers else 'others'
      )  # fmt: skip
      roles[role].update(process_pss_mb(pid, files_under))
    except (OSError, psutil.Error):  # it exited meanwhile
      pass
  for role, kinds in roles.items():
    by_kind = ', '.join(f'{kind} {mb:,.0f}' for kind, mb in kinds.most_common() if mb >= 1)
    print(f'  {role}: {sum(kinds.values()):,.0f} MB ({by_kind})', flush=True)


def job_memory(root: str, mode: str, gpu: Optional[int], job: tuple, start_method: str, batches):
  r"""``launcher``'s report of one job (``(trainers per partition, sampling
  processes per trainer)``), run in a process of its own."""
  out = SPAWN.Queue()
  args = (root, mode, gpu, *job, batches, start_method, out)
  proc = SPAWN.Process(target=launcher, args=args, name='the launcher')
  proc.start()
  try:
    return next_report(out, [proc], time.monotonic() + 2 * WAIT_S, f'the {mode} job')
  finally:
    proc.join(300)
    if proc.is_alive():
      proc.kill()


def median_job_memory(args, root: str, mode: str, job: tuple, start_method: str):
  r"""``job_memory``'s report of the run, of ``args.rounds`` runs of the job,
  whose host total is the median: what the channels and heaps hold at the
  measurement varies by a batch or two from run to run."""
  runs = [
    job_memory(root, mode, args.gpu, job, start_method, args.batches) for _ in range(args.rounds)
  ]
  runs.sort(key=lambda run: sum(run[0].values()))
  return runs[len(runs) // 2]


def forked_idle(ready, stop) -> None:
  r"""A process forked from a bare one that says it runs and waits to be told
  to exit."""
  ready.send(True)
  stop.poll(120)


def bare_process(out) -> None:
  r"""Puts on ``out`` this process's PSS by kind, a process that imported
  torch and this library and nothing more; the MB that a process forked
  from it (as sampling processes are from their trainer or fork server) adds
  to the two while it does nothing; and its PSS by kind once it has also
  imported PyG, as a trainer's loader does (batches are PyG's ``Data``)."""
  alone = tree_pss_mb()[0]
  fork = multiprocessing.get_context('fork')
  ready_reader, ready_writer = fork.Pipe(duplex=False)
  stop_reader, stop_writer = fork.Pipe(duplex=False)
  child = fork.Process(target=forked_idle, args=(ready_writer, stop_reader), name='forked')
  child.start()
  try:
    if not ready_reader.poll(60):
      raise RuntimeError('the forked process did not start within 60 s')
    with_child = tree_pss_mb()[0]
  finally:
    stop_writer.send(True)
    child.join(60)
    if child.is_alive():
      child.kill()
  import_pyg()
  with_pyg = tree_pss_mb()[0]
  out.put(BareProcesses(alone, sum(with_child.values()) - sum(alone.values()), with_pyg))


def bare_process_mb() -> 'BareProcesses':
  r"""``bare_process``'s report, from a process of its own."""
  out = SPAWN.Queue()
  proc = SPAWN.Process(target=bare_process, args=(out,), name='the bare process')
  proc.start()
  try:
    return next_report(out, [proc], time.monotonic() + 120, 'the bare process')
  finally:
    proc.join(60)
    if proc.is_alive():
      proc.kill()


def bare_floor_mb(bare: 'BareProcesses', count: int, fresh: int, with_pyg: int) -> float:
  r"""What ``count`` processes hold at least, ``fresh`` of them interpreters
  of their own, ``with_pyg`` of those importing PyG (spawned trainers, or
  the fork server the trainers are forked from), and the rest forked
  (``bare_process``'s report): each of those a bare process with PyG, each
  other fresh one a bare process, each forked one what a forked bare
  process adds, and the libraries once."""
  others = (fresh - with_pyg) * bare.alone['process'] + (count - fresh) * bare.forked
  return with_pyg * bare.with_pyg['process'] + others + bare.with_pyg['libraries']


def job_modes(args) -> list:
  r"""The graph modes to run: ``--modes``, or 'CPU' and with ``--gpu`` the
  GPU modes too."""
  if args.modes:
    return args.modes
  return ['CPU'] if args.gpu is None else ['CPU', 'ZERO_COPY', 'CUDA']


def batches_in_flight_mb(batch_mb: float, trainers: int, samplers: int) -> float:
  r"""The MB of the fewest batches a job of ``trainers``, each with
  ``samplers`` sampling processes, holds while all of them work: each
  trainer's batch it trains on, and a batch each sampling process writes
  (batches of ``batch_mb``)."""
  return trainers * (1 + samplers) * batch_mb


def memory_rows(args, root: str, bare: BareProcesses) -> list:
  r"""A row per mode and job: its memory by kind (tables, channels, the GPU
  driver's, the processes' own), what as many ``bare`` processes would hold,
  the batches that must be in flight, the host total and its floors (the
  tables and the bare processes; and the batches in flight) against the
  mode's first job's, and the GPU's."""
  rows = []
  for mode in job_modes(args):
    for start_method in args.start_methods:
      first = None
      for per_partition, samplers in JOBS:
        pss, count, fresh, gpu_mb, batch_mb = median_job_memory(
          args, root, mode, (per_partition, samplers), start_method
        )
        total = sum(pss.values())
        tables = pss['shared tables'] + pss['partition files']
        with_pyg = NUM_PARTITIONS * per_partition if start_method == 'spawn' else 1
        floor = bare_floor_mb(bare, count, fresh, with_pyg)
        in_flight = batches_in_flight_mb(batch_mb, NUM_PARTITIONS * per_partition, samplers)
        first = first or (total, tables, tables + floor, tables + floor + in_flight)
        own = pss['process'] + pss['libraries']
        job = f'{per_partition} trainer(s) x {samplers} sampler(s)'
        rows.append([
          mode, STARTS[start_method], job, f'{count} ({fresh})', tables, pss['channels'],
          pss['GPU driver'], own, floor, batch_mb, in_flight, total, total / first[0],
          (tables + floor) / first[2], (tables + floor + in_flight) / first[3],
          tables / first[1], gpu_mb,
        ])  # fmt: skip
        print(f'{mode}, {start_method}, {job}: {count} processes, {total:,.0f} MB', flush=True)
  return rows


def memory_note(args, bare: BareProcesses) -> str:
  r"""The memory table's note: what is measured and how."""
  return (
    f'PSS of every process of the job (launcher, trainers, sampling processes) after '
    f'{WARMUP} + {args.batches} batches per trainer (of {args.rounds} runs of each job, the '
    'one whose host total is the median), by what the pages hold '
    '(benchmarks/memory.py): a page shared by k processes counts 1/k in each, so a table the '
    'processes share counts once. Trainers: forked from the fork server glt.utils.spawn '
    'starts them from (it imports torch, PyG, this library and the script once), or each a '
    "fresh interpreter, as torch.multiprocessing.spawn starts them (GLT's examples). "
    'Processes: all of them, and in brackets those that started an interpreter of their own '
    '(the launcher, spawned trainers, fork servers); the others are forked (forked trainers, '
    'sampling processes). Tables: '
    'the topologies, feature tables and their maps, in shared memory or read in place from '
    "the partition files. Channels: each trainer's shared-memory channel (256 MB, backed as "
    "batches pass). Processes' own: the libraries and each process's heap and buffers; 'bare "
    "processes': what as many processes hold that do nothing else: a spawned trainer or the "
    'fork server one that imports torch, this library and PyG, as a loader does '
    f'({bare.with_pyg["process"]:.0f} MB each), '
    f'another fresh one (the launcher) one that imports torch and this library '
    f'({bare.alone["process"]:.0f} MB each), a forked one a process forked from such a one '
    f'({bare.forked:.1f} MB each), and their libraries once ({bare.with_pyg["libraries"]:.0f} '
    "MB), measured in this run. Floor: the tables and the bare processes, what the job's "
    'processes hold before they sample. Batch: the mean bytes of a batch (its tensors in '
    'host memory) as the trainers received it; each trainer keeps the batch it has while it '
    'waits for the next, as a training loop keeps the one it trains on. Batches in flight: '
    'the fewest a job '
    'holds while every process works, one a trainer (the one it trains on) and one a sampling '
    'process (the one it writes); floor with batches: the floor and those, the least the '
    "job can hold whatever its processes keep besides. GPU: the device's memory in use at "
    'the measurement '
    'less before the launcher loaded the partitions, which it places on the GPU once for the '
    'trainers and sampling processes (GPU modes); with sampling processes on the GPU, each '
    "trainer also holds its channel's GPU mirror there (256 MB, as its channel), through "
    'which its batches come device to device.'
  )


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--num_nodes', type=int, default=1_000_000)
  p.add_argument('--batches', type=int, default=30, help='batches per trainer after warm-up')
  p.add_argument(
    '--rounds', type=int, default=3, help="runs of each job: the table gives the median's"
  )
  p.add_argument('--gpu', type=int, default=None, help="also the 'ZERO_COPY' and 'CUDA' jobs")
  p.add_argument(
    '--modes', nargs='+', choices=['CPU', 'ZERO_COPY', 'CUDA'], default=None,
    help="only these graph modes (the GPU modes need --gpu): a GPU machine's run can leave "
    "'CPU' to a CPU host",
  )  # fmt: skip
  p.add_argument(
    '--start_methods', nargs='+', choices=list(STARTS), default=list(STARTS),
    help="how the launcher starts its trainers: forked from glt.utils.spawn's fork server, or "
    'spawned (fresh interpreters)',
  )  # fmt: skip
  p.add_argument(
    '--partitioner', choices=['metis', 'random'], default='metis',
    help="how the graph is split: 'random' for graphs METIS cannot hold here",
  )  # fmt: skip
  add_results_argument(p)
  args = p.parse_args()
  if args.gpu is None and set(args.modes or ()) - {'CPU'}:
    p.error("the 'ZERO_COPY' and 'CUDA' modes need --gpu")
  results = Results('bench_dist_memory' + ('_gpu' if args.gpu is not None else ''), args)
  root = partition(args.num_nodes, partitioner=args.partitioner)
  bare = bare_process_mb()
  rows = memory_rows(args, root, bare)
  table = Table(
    'memory',
    f'Memory of worker mode, {args.num_nodes:,} nodes, {NUM_PARTITIONS} '
    f'{"METIS" if args.partitioner == "metis" else "random"} partitions on '
    'one host, per partition 1 trainer x 1 sampling process and 2 trainers x 2',
    [
      'mode',
      'trainers',
      'per partition',
      'processes (fresh)',
      'tables, MB',
      'channels, MB',
      'GPU driver, MB',
      "processes' own, MB",
      'bare processes, MB',
      'batch, MB',
      'batches in flight, MB',
      'host, MB',
      'host vs 1 trainer',
      'floor vs 1 trainer',
      'floor with batches vs 1 trainer',
      'tables vs 1 trainer',
      'GPU, MB',
    ],  # fmt: skip
    rows,
    note=memory_note(args, bare),
  )
  print(results.add(table).render())
  results.write()


if __name__ == '__main__':
  main()
