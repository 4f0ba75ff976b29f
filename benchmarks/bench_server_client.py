"""Client throughput in server-client mode vs worker mode, on the same data.

  python benchmarks/bench_server_client.py [--num_nodes 1000000] [--batches 320]
                                          [--glt-python .venv-glt/bin/python]
                                          [--glt_batches 80]

Graph and partitions as in bench_dist_sampling.py (the planted-community
graph, METIS in 2, cached under .bench/dist_sampling); every loader samples
fanout [15, 10, 5] around batches of 1024 random seeds of its partition and
collects features and labels. Rows, all measured in this run on this
machine:
  - worker mode: 2 trainers, each with 2 sampling processes (the best worker
    row of bench_dist_sampling.py), measured before and after the
    server-client row (the machine's speed drifts) and pooled;
  - server-client: 2 servers (one partition each) and 2 clients; client i
    samples on server i, in its ``--num_workers`` sampling processes (which
    map the other server's partition in place), ``--concurrency`` batches
    in flight on each as in worker mode, ``prefetch_size`` requested ahead;
    ``--num_workers 1`` samples in the server's own process;
  - with --glt-python, GLT 0.2.4's server-client mode on the same partitions
    (glt_dist_peer.py --mode server-client: 2 servers with 2 sampling
    processes each, 2 clients), as GLT's server_client_mode example runs it.
Throughput is both clients' (trainers') batches over the wall time; the
start, the seconds from starting the processes to the later first batch.
Ours and worker mode time ``--batches`` batches each (10 s or so: shorter
windows make the ratio a coin toss on a machine whose speed drifts); GLT,
ten times slower, ``--glt_batches``.
"""

import argparse
import os
import statistics

import numpy as np
import torch
from bench_dist_sampling import (
  BATCH,
  FANOUT,
  SPAWN,
  free_port,
  partition,
  run_timed,
  time_loader,
  worker_mode,
)
from dist_peers import glt_worker_mode
from results import Results, Table, add_results_argument

import graphlearn_torch as glt


def server(rank, root, port):
  torch.set_num_threads(1)
  dist = glt.distributed
  ds = dist.DistDataset(edge_dir='in').load(root, rank, graph_mode='CPU')
  dist.init_server(2, rank, ds, '127.0.0.1', port, num_clients=2, num_rpc_threads=8)
  dist.wait_and_shutdown_server()


def client(rank, root, port, batches, num_workers, concurrency, results):
  torch.set_num_threads(1)
  dist = glt.distributed
  dist.init_client(2, 2, rank, '127.0.0.1', port)
  try:
    book = torch.from_numpy(np.load(os.path.join(root, 'node_pb.npy')))
    options = dist.RemoteDistSamplingWorkerOptions(
      server_rank=rank, num_workers=num_workers, worker_concurrency=concurrency, prefetch_size=4
    )
    results.put((rank, time_loader(None, book, rank, options, batches)))
  finally:
    dist.shutdown_client()


def server_client(root: str, batches: int, num_workers: int, concurrency: int):
  port = free_port()
  results = SPAWN.Queue()
  procs = [SPAWN.Process(target=server, args=(r, root, port)) for r in range(2)]
  procs += [
    SPAWN.Process(target=client, args=(r, root, port, batches, num_workers, concurrency, results))
    for r in range(2)
  ]
  return run_timed(procs, results, 2)  # the clients' timers; servers exit after them


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--num_nodes', type=int, default=1_000_000)
  p.add_argument('--batches', type=int, default=320, help='timed batches of ours and worker mode')
  p.add_argument('--glt_batches', type=int, default=80, help="timed batches of GLT's")
  p.add_argument('--num_workers', type=int, default=2, help='sampling processes per server')
  p.add_argument(
    '--concurrency', type=int, default=4, help='batches in flight on each sampling process'
  )
  p.add_argument(
    '--glt-python', default=None,
    help="GLT 0.2.4's environment's python: its server-client mode on the same partitions",
  )  # fmt: skip
  p.add_argument('--runs', type=int, default=3, help='runs of every row, back to back')
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_server_client', args)
  root = partition(args.num_nodes)
  runs = [one_run(args, root) for _ in range(args.runs)]
  print(results.add(server_client_table(args, runs)).render())
  results.write()


WORKERS = 'worker mode, 2 trainers x 2 samplers'
GLT_ROW = 'GLT 0.2.4 server-client, 2 servers x 2 samplers + 2 clients'


def one_run(args, root: str) -> dict:
  r"""One run of every row: worker mode before and after ours (pooled: the
  machine's speed drifts), ours, GLT's; ``{row: run_timed's result}``."""
  per_client = args.batches // 2
  before = worker_mode(root, 'mp', 2, per_client, gpu=None)
  sc = server_client(root, per_client, args.num_workers, args.concurrency)
  after = worker_mode(root, 'mp', 2, per_client, gpu=None)
  run = {
    WORKERS: (*(a + b for a, b in zip(before[:3], after[:3])), None, min(before[4], after[4])),
    ours_row(args): sc,
  }
  if args.glt_python:
    glt_per_client = args.glt_batches // 2
    run[GLT_ROW] = glt_worker_mode(args.glt_python, root, 'server-client', glt_per_client, 2)
  return run


def ours_row(args) -> str:
  if args.num_workers > 1:
    return f'server-client, 2 servers x {args.num_workers} samplers + 2 clients'
  return f'server-client, 2 servers + 2 clients, {args.concurrency} batches in flight'


def server_client_table(args, runs: list) -> Table:
  r"""Each row's throughput (pooled over the runs) against worker mode's,
  and its median start; every run's ratios in the note."""

  def rate(result) -> float:
    return result[0] / result[2]

  names = list(runs[0])
  pooled = {n: [sum(run[n][k] for run in runs) for k in range(3)] for n in names}
  base = rate(pooled[WORKERS])
  table_rows = [
    [n, rate(pooled[n]), pooled[n][1] / pooled[n][2], rate(pooled[n]) / base,
     statistics.median(run[n][4] for run in runs)]
    for n in names
  ]  # fmt: skip
  ours = ours_row(args)
  each = '; '.join(
    f'run {i + 1}: {rate(run[ours]):.2f} vs worker mode {rate(run[WORKERS]):.2f} batches/s '
    f'({rate(run[ours]) / rate(run[WORKERS]):.2f}x)'
    + (f', GLT {rate(run[GLT_ROW]):.2f} ({rate(run[ours]) / rate(run[GLT_ROW]):.2f}x)'
       if GLT_ROW in run else '')
    for i, run in enumerate(runs)
  )  # fmt: skip
  note = (
    f'Fanout {FANOUT}, batches of {BATCH} seeds, features and labels collected. '
    f'{len(runs)} runs back to back, each of worker mode (before and after ours, pooled), '
    'ours and GLT; batches/s pooled over the runs, start the median. Start: from starting '
    "the processes to the later of the trainers' (clients') first batches. Each run, "
    f'ours: {each}.'
  )
  return Table(
    'server_client',
    f'Server-client against worker mode, {args.num_nodes:,} nodes, 2 METIS partitions',
    ['mode', 'batches/s', 'sampled edges/s', 'vs worker mode', 'start to first batch, s'],
    table_rows,
    chart={'label': 'mode', 'value': 'batches/s'},
    note=note,
  )


if __name__ == '__main__':
  main()
