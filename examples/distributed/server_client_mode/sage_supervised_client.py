"""Server-client GraphSAGE, the clients: DDP trainers whose batches the
servers sample (start sage_supervised_server.py first, or alongside).

Each client trains on the training split of its servers' partitions
(RemoteNodeSplitSamplerInput: the servers read the seeds) and reports test
accuracy summed over the clients. ``--num_local_clients`` of them start on
this machine, ranks from ``--client_rank_start``.
"""

import argparse
import logging
import os
import sys
from datetime import timedelta

import torch
import torch.distributed

import graphlearn_torch as glt
from graphlearn_torch.distributed import DistServer, request_server
from graphlearn_torch.sampler import RemoteNodeSplitSamplerInput

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import sage_common  # noqa: E402


def run_client(local_rank: int, args, results) -> None:
  rank = args.client_rank_start + local_rank
  logging.basicConfig(level=logging.INFO, format=f'%(asctime)s [client {rank}] %(message)s')
  torch.manual_seed(args.seed)
  sage_common.set_trainer_threads(args.num_local_clients or args.num_clients)
  glt.distributed.init_client(
    num_servers=args.num_servers,
    num_clients=args.num_clients,
    client_rank=rank,
    master_addr=args.master_addr,
    master_port=args.master_port,
    request_timeout=args.timeout,
  )
  try:
    glt.utils.default_socket_ifname(args.master_addr)  # gloo: the interface to the servers
    torch.distributed.init_process_group(
      'gloo',
      init_method=f'tcp://{args.master_addr}:{args.training_pg_master_port}',
      world_size=args.num_clients,
      rank=rank,
      timeout=timedelta(seconds=args.timeout),
    )
    feature_dim = request_server(0, DistServer.get_tensor_size, None)[1]
    num_classes = request_server(0, DistServer.get_num_classes)

    def loader(split, shuffle):
      options = glt.distributed.RemoteDistSamplingWorkerOptions(
        num_workers=args.num_workers,
        worker_concurrency=args.worker_concurrency,
        prefetch_size=args.prefetch_size,
        rpc_timeout=args.timeout,
      )
      seeds = RemoteNodeSplitSamplerInput(split)
      return sage_common.node_loader(args, rank, None, seeds, shuffle, options)

    train_loader, test_loader = loader('train', True), loader('test', False)
    acc = sage_common.train_ddp(args, rank, feature_dim, num_classes, train_loader, test_loader)
    if results is not None:
      results.put((rank, acc))
    train_loader.shutdown()
    test_loader.shutdown()
    torch.distributed.destroy_process_group()
  finally:
    glt.distributed.shutdown_client()


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--num_servers', type=int, default=2, help='servers in the job')
  p.add_argument('--num_clients', type=int, default=2, help='clients in the job')
  p.add_argument('--num_local_clients', type=int, default=None, help='default: all clients')
  p.add_argument('--client_rank_start', type=int, default=0, help='rank of the first local one')
  p.add_argument('--master_addr', default='127.0.0.1')
  p.add_argument('--master_port', type=int, default=11120, help='the job rendezvous')
  p.add_argument('--training_pg_master_port', type=int, default=11121, help="the clients' DDP")
  p.add_argument('--num_workers', type=int, default=1, help='sampling processes per server')
  p.add_argument('--worker_concurrency', type=int, default=4)
  p.add_argument('--prefetch_size', type=int, default=4, help='batches requested ahead')
  sage_common.add_training_args(p)
  return p


def main(argv=None, results=None) -> None:
  args = sage_common.parse_args(parser(), argv)
  local = args.num_local_clients or args.num_clients
  glt.utils.spawn(run_client, args=(args, results), nprocs=local)


if __name__ == '__main__':
  main()
