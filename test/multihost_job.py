"""The processes of the multi-host tests, one role per invocation, each run
on its host with ``ip netns exec``:

  trainer RANK WORLD MASTER PORT ROOT OUT [--epochs N] [--until-error]
  server  RANK NUM_SERVERS MASTER PORT ROOT NUM_CLIENTS
  client  NUM_SERVERS MASTER PORT ROOT OUT

A trainer samples its partition's training seeds in worker mode (2 sampling
processes, full fanout) and saves every batch to OUT; with --until-error it
samples epoch after epoch, printing RUNNING once batches flow, until the
loader raises, and prints the error and how long its last batch had been
waiting. A client does the same through 2 servers. Every process prints
one line DONE or FAILED: <error> before it exits.
"""

import argparse
import logging
import sys
import time

import torch

import graphlearn_torch as glt

FANOUT = [-1, -1]
BATCH_SIZE = 16


def batches_of(loader, epochs: int):
  out = []
  for _ in range(epochs):
    for batch in loader:
      out.append({
        'seeds': batch.n_id[: batch.batch_size].clone(),
        'n_id': batch.n_id.clone(),
        'e_id': batch.e_id.clone(),
        'edge_index': batch.edge_index.clone(),
        'x': batch.x.clone(),
        'y': batch.y.clone(),
      })  # fmt: skip
  return out


def until_error(loader) -> None:
  r"""Samples until the loader raises; prints RUNNING, then the error."""
  batches = 0
  last = time.monotonic()
  try:
    while True:
      for _ in loader:
        batches += 1
        last = time.monotonic()
        if batches == 10:
          print('RUNNING', flush=True)
  except Exception as e:
    print(f'ERROR {time.monotonic() - last:.1f} s after the last batch: {type(e).__name__}: {e}')
    print('ERROR-END', flush=True)


def node_loader(ds, seeds, options):
  return glt.distributed.DistNeighborLoader(
    ds, FANOUT, seeds, batch_size=BATCH_SIZE, shuffle=False, edge_dir='out',
    with_edge=True, collect_features=True, worker_options=options,
  )  # fmt: skip


def drive(loader, args) -> None:
  r"""Samples until an error (--until-error), or saves the batches of
  --epochs epochs; shuts the loader down."""
  try:
    if args.until_error:
      until_error(loader)
    else:
      torch.save(batches_of(loader, args.epochs), args.out)
  finally:
    loader.shutdown()


def trainer(args) -> None:
  dist = glt.distributed
  dist.init_worker_group(args.world, args.rank, 'trainer')
  ds = dist.DistDataset(edge_dir='out').load(args.root, args.rank, graph_mode='CPU')
  options = dist.MpDistSamplingWorkerOptions(
    num_workers=2, worker_concurrency=args.concurrency, master_addr=args.master,
    master_port=args.port, rpc_timeout=args.timeout, channel_size='16MB',
  )  # fmt: skip
  drive(node_loader(ds, ds.train_idx, options), args)


def server(args) -> None:
  dist = glt.distributed
  ds = dist.DistDataset(edge_dir='out').load(args.root, args.rank, graph_mode='CPU')
  dist.init_server(
    args.num_servers, args.rank, ds, args.master, args.port, num_clients=args.num_clients,
    num_rpc_threads=8, request_timeout=args.timeout,
  )  # fmt: skip
  dist.wait_and_shutdown_server(timeout=300)


def client(args) -> None:
  dist = glt.distributed
  dist.init_client(args.num_servers, 1, 0, args.master, args.port, request_timeout=args.timeout)
  try:
    seeds = torch.cat([
      dist.DistDataset(edge_dir='out').load(args.root, r, graph_mode='CPU').train_idx
      for r in range(args.num_servers)
    ])  # fmt: skip
    options = dist.RemoteDistSamplingWorkerOptions(
      server_rank=list(range(args.num_servers)), num_workers=1, worker_concurrency=2,
      prefetch_size=2, rpc_timeout=args.timeout,
    )  # fmt: skip
    drive(node_loader(None, seeds, options), args)
  finally:
    dist.shutdown_client()


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser()
  roles = p.add_subparsers(dest='role', required=True)
  t = roles.add_parser('trainer')
  for name in ('rank', 'world'):
    t.add_argument(name, type=int)
  s = roles.add_parser('server')
  for name in ('rank', 'num_servers'):
    s.add_argument(name, type=int)
  c = roles.add_parser('client')
  c.add_argument('num_servers', type=int)
  for role in (t, s, c):
    # the RPC timeout: a lost peer becomes an error after this long
    role.add_argument('--timeout', type=float, default=60)
    role.add_argument('master')
    role.add_argument('port', type=int)
    role.add_argument('root')
  s.add_argument('num_clients', type=int)
  for role in (t, c):
    role.add_argument('out')
    role.add_argument('--epochs', type=int, default=1)
    role.add_argument('--until-error', action='store_true')
  t.add_argument('--concurrency', type=int, default=4)
  return p


if __name__ == '__main__':
  logging.basicConfig(level=logging.WARNING)
  args = parser().parse_args()
  try:
    {'trainer': trainer, 'server': server, 'client': client}[args.role](args)
  except Exception as e:
    print(f'FAILED: {type(e).__name__}: {e}', flush=True)
    sys.exit(1)
  print('DONE', flush=True)
