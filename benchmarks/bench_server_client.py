"""Client throughput in server-client mode vs worker mode, on the same data.

  python benchmarks/bench_server_client.py [--num_nodes 1000000] [--batches 40]

Graph and partitions as in bench_dist_sampling.py (the planted-community
graph, METIS in 2, cached under .bench/dist_sampling); every loader samples
fanout [15, 10, 5] around batches of 1024 random seeds of its partition and
collects features and labels. Rows, all measured in this run on this
machine:
  - worker mode: 2 trainers, each with 2 sampling processes (the best worker
    row of bench_dist_sampling.py), measured before and after the
    server-client row (the machine's speed drifts) and pooled;
  - server-client: 2 servers (one partition each) and 2 clients; client i
    samples on server i (which asks the other for remote hops and
    features), with ``num_workers * worker_concurrency`` batches in flight on
    the server and ``prefetch_size`` requested ahead.
Throughput is both clients' (trainers') batches over the wall time.
"""

import argparse

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
from results import Results, Table, add_results_argument

import graphlearn_torch as glt


def server(rank, root, port):
  torch.set_num_threads(1)
  dist = glt.distributed
  ds = dist.DistDataset(edge_dir='in').load(root, rank, graph_mode='CPU')
  dist.init_server(2, rank, ds, '127.0.0.1', port, num_clients=2, num_rpc_threads=8)
  dist.wait_and_shutdown_server()


def client(rank, root, port, batches, concurrency, results):
  torch.set_num_threads(1)
  dist = glt.distributed
  dist.init_client(2, 2, rank, '127.0.0.1', port)
  try:
    book = dist.DistDataset(edge_dir='in').load(root, rank, graph_mode='CPU').node_pb
    options = dist.RemoteDistSamplingWorkerOptions(
      server_rank=rank, num_workers=1, worker_concurrency=concurrency, prefetch_size=4
    )
    results.put((rank, time_loader(None, book, rank, options, batches)))
  finally:
    dist.shutdown_client()


def server_client(root: str, batches: int, concurrency: int):
  port = free_port()
  results = SPAWN.Queue()
  procs = [SPAWN.Process(target=server, args=(r, root, port)) for r in range(2)]
  procs += [
    SPAWN.Process(target=client, args=(r, root, port, batches, concurrency, results))
    for r in range(2)
  ]
  return run_timed(procs, results, 2)  # the clients' timers; servers exit after them


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--num_nodes', type=int, default=1_000_000)
  p.add_argument('--batches', type=int, default=40, help='timed batches per mode')
  p.add_argument('--concurrency', type=int, default=8, help='batches in flight on a server')
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_server_client', args)
  root = partition(args.num_nodes)
  per_client = args.batches // 2
  before = worker_mode(root, 'mp', 2, per_client, gpu=None)
  sc = server_client(root, per_client, args.concurrency)
  after = worker_mode(root, 'mp', 2, per_client, gpu=None)
  workers = tuple(a + b for a, b in zip(before[:3], after[:3]))
  base = workers[0] / workers[2]
  rows = [
    ('worker mode, 2 trainers x 2 samplers', workers),
    (f'server-client, 2 servers + 2 clients, {args.concurrency} batches in flight', sc),
  ]
  table = Table(
    'server_client',
    f'Server-client against worker mode, {args.num_nodes:,} nodes, 2 METIS partitions',
    ['mode', 'batches/s', 'sampled edges/s', 'vs worker mode'],
    [[name, c / s, e / s, c / s / base] for name, (c, e, s, *_) in rows],
    chart={'label': 'mode', 'value': 'batches/s'},
    note=f'Fanout {FANOUT}, batches of {BATCH} seeds, features and labels collected. Worker '
    f'mode measured before and after the server-client row ({before[0] / before[2]:.2f} / '
    f'{after[0] / after[2]:.2f} batches/s) and pooled.',
  )
  print(results.add(table).render())
  results.write()


if __name__ == '__main__':
  main()
