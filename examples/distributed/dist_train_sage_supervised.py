"""Distributed GraphSAGE in worker mode: one trainer per partition, DDP.

  # one machine, 2 trainers, synthetic data (partitioned on first use):
  python examples/distributed/dist_train_sage_supervised.py
  # Cora from the Planetoid raw files:
  python examples/distributed/dist_train_sage_supervised.py --dataset cora \\
      --raw_dataset_dir ../shared/datasets/planetoid
  # two machines, one trainer each (run on both, node_rank 0 and 1):
  python examples/distributed/dist_train_sage_supervised.py --num_nodes 2 --node_rank 0 \\
      --num_training_procs 1 --master_addr 10.0.0.1
  # on GPUs (trainer i on GPU i; the CPU path, with a log line, without one):
  python examples/distributed/dist_train_sage_supervised.py --device cuda \\
      --graph_mode ZERO_COPY --split_ratio 0.2

Every trainer loads its partition (``{dataset_root_dir}/{dataset}-partitions``,
made with examples/partition_dataset.py when missing), samples batches of its
training seeds across all partitions in ``--num_workers`` sampling processes
(MpDistSamplingWorkerOptions), and trains one DDP replica; test accuracy is
summed over the trainers' test seeds. Arguments follow GLT's example.
"""

import argparse
import logging
import os
import sys
from datetime import timedelta

import torch
import torch.distributed

import graphlearn_torch as glt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sage_common  # noqa: E402


def train(local_rank: int, args, root: str, results) -> None:
  rank = args.node_rank * args.num_training_procs + local_rank
  world_size = args.num_nodes * args.num_training_procs
  logging.basicConfig(level=logging.INFO, format=f'%(asctime)s [trainer {rank}] %(message)s')
  torch.manual_seed(args.seed)
  # each trainer runs beside its train and test loaders' sampling processes
  sage_common.set_trainer_threads(args.num_training_procs * (1 + 2 * args.num_workers))
  device = sage_common.trainer_device(args, local_rank)
  glt.distributed.init_worker_group(world_size, rank, 'distributed-sage-supervised-trainer')
  # gloo and RPC advertise the interface that reaches the master, not the
  # hostname's address (a loopback one on many machines)
  glt.utils.default_socket_ifname(args.master_addr)
  torch.distributed.init_process_group(
    sage_common.training_backend(args, device),
    init_method=f'tcp://{args.master_addr}:{args.training_pg_master_port}',
    world_size=world_size,
    rank=rank,
    timeout=timedelta(seconds=args.timeout),
  )
  ds = glt.distributed.DistDataset(edge_dir='in').load(
    root,
    rank % args.num_dataset_partitions,
    graph_mode=args.graph_mode,
    feature_with_gpu=device.type == 'cuda',
    device=device.index,
    split_ratio=args.split_ratio if args.split_ratio > 0 else None,
  )
  sage_common.log_placement(ds, device)
  num_classes = int(ds.meta.get('num_classes', 0)) or int(ds.node_labels.max()) + 1

  def loader(seeds, port, shuffle):
    options = glt.distributed.MpDistSamplingWorkerOptions(
      num_workers=args.num_workers,
      worker_concurrency=args.worker_concurrency,
      master_addr=args.master_addr,
      master_port=port,
      rpc_timeout=args.timeout,
      channel_size=args.channel_size,
      worker_devices=[device] if device.type == 'cuda' else None,
      pin_memory=device.type == 'cuda',
    )
    return sage_common.node_loader(args, rank, ds, seeds, shuffle, options, device)

  train_loader = loader(ds.train_idx, args.train_loader_master_port, True)
  test_loader = loader(ds.test_idx, args.test_loader_master_port, False)
  acc = sage_common.train_ddp(
    args, rank, ds.node_features.shape[1], num_classes, train_loader, test_loader, device
  )
  if results is not None:
    results.put((rank, acc))
  train_loader.shutdown()
  test_loader.shutdown()
  torch.distributed.destroy_process_group()


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  sage_common.add_dataset_args(p)
  p.add_argument('--num_nodes', type=int, default=1, help='machines')
  p.add_argument('--node_rank', type=int, default=0, help='this machine')
  p.add_argument('--num_training_procs', type=int, default=2, help='trainers per machine')
  p.add_argument('--master_addr', default='127.0.0.1')
  p.add_argument('--training_pg_master_port', type=int, default=11111)
  p.add_argument('--train_loader_master_port', type=int, default=11112)
  p.add_argument('--test_loader_master_port', type=int, default=11113)
  p.add_argument('--num_workers', type=int, default=1, help='sampling processes per trainer')
  p.add_argument('--worker_concurrency', type=int, default=4)
  p.add_argument('--channel_size', default='256MB')
  sage_common.add_training_args(p)
  sage_common.add_gpu_args(p)
  return p


def main(argv=None, results=None):
  args = sage_common.parse_args(parser(), argv)
  root = sage_common.ensure_partitions(args)
  glt.utils.spawn(train, args=(args, root, results), nprocs=args.num_training_procs)


if __name__ == '__main__':
  logging.basicConfig(level=logging.INFO, format='%(asctime)s %(message)s', datefmt='%H:%M:%S')
  main()
