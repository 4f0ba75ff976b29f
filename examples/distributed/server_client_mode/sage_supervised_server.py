"""Server-client GraphSAGE, the servers: each holds one partition and samples
batches for the clients (run sage_supervised_client.py alongside).

  # one machine, 2 servers + 2 clients, synthetic data (partitioned on first use):
  python examples/distributed/server_client_mode/sage_supervised_server.py &
  python examples/distributed/server_client_mode/sage_supervised_client.py
  # Cora (the clients need no data):
  python .../sage_supervised_server.py --dataset cora \\
      --raw_dataset_dir ../shared/datasets/planetoid &
  python .../sage_supervised_client.py

Servers run until every client has left (or died). ``--num_local_servers``
of them start on this machine, ranks from ``--server_rank_start``.
"""

import argparse
import logging
import os
import sys

import graphlearn_torch as glt

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import sage_common  # noqa: E402

log = logging.getLogger('sage_server')


def run_server(local_rank: int, args, root: str) -> None:
  rank = args.server_rank_start + local_rank
  logging.basicConfig(level=logging.INFO, format=f'%(asctime)s [server {rank}] %(message)s')
  ds = glt.distributed.DistDataset(edge_dir='in').load(
    root, rank % args.num_dataset_partitions, graph_mode='CPU'
  )
  glt.distributed.init_server(
    num_servers=args.num_servers,
    server_rank=rank,
    dataset=ds,
    master_addr=args.master_addr,
    master_port=args.master_port,
    num_clients=args.num_clients,
    num_rpc_threads=args.num_rpc_threads,
    request_timeout=args.timeout,
  )
  log.info('serving partition %d until the clients leave', ds.partition_idx)
  glt.distributed.wait_and_shutdown_server()
  log.info('done')


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  sage_common.add_dataset_args(p)
  p.add_argument('--num_servers', type=int, default=2, help='servers in the job')
  p.add_argument('--num_clients', type=int, default=2, help='clients in the job')
  p.add_argument('--num_local_servers', type=int, default=None, help='default: all servers')
  p.add_argument('--server_rank_start', type=int, default=0, help='rank of the first local one')
  p.add_argument('--master_addr', default='127.0.0.1')
  p.add_argument('--master_port', type=int, default=11120, help='the job rendezvous')
  p.add_argument('--num_rpc_threads', type=int, default=16)
  p.add_argument('--timeout', type=float, default=60, help='seconds a request may take')
  return p


def main(argv=None) -> None:
  args = sage_common.parse_args(parser(), argv)
  root = sage_common.ensure_partitions(args)
  local = args.num_local_servers or args.num_servers
  glt.utils.spawn(run_server, args=(args, root), nprocs=local)


if __name__ == '__main__':
  main()
