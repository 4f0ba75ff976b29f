# GLT 0.2.x's examples/distributed/server_client_mode/sage_supervised_server.py,
# written against GLT's API (it has no CUDA lines to change).
import argparse
import os.path as osp

import torch

import graphlearn_torch as glt


def run_server_proc(
  proc_rank: int,
  num_server_procs_per_node: int,
  node_rank: int,
  num_servers: int,
  num_clients: int,
  dataset: glt.distributed.DistDataset,
  master_addr: str,
  server_client_port: int,
):
  server_rank = node_rank * num_server_procs_per_node + proc_rank
  print(f'-- [Server {server_rank}] Initializing server ...')
  glt.distributed.init_server(
    num_servers=num_servers,
    server_rank=server_rank,
    dataset=dataset,
    master_addr=master_addr,
    master_port=server_client_port,
    num_clients=num_clients,
    num_rpc_threads=16,
    server_group_name='dist_train_supervised_sage_server',
  )
  print(f'-- [Server {server_rank}] Waiting for exit ...')
  glt.distributed.wait_and_shutdown_server()
  print(f'-- [Server {server_rank}] Exited ...')


if __name__ == '__main__':
  parser = argparse.ArgumentParser(
    description='Arguments for distributed training of supervised SAGE with servers.'
  )
  parser.add_argument('--dataset', type=str, default='ogbn-products')
  parser.add_argument('--dataset_root_dir', type=str, default='../../../data/products')
  parser.add_argument('--num_dataset_partitions', type=int, default=2)
  parser.add_argument('--num_server_nodes', type=int, default=2)
  parser.add_argument('--num_client_nodes', type=int, default=2)
  parser.add_argument('--node_rank', type=int, default=0)
  parser.add_argument('--num_server_procs_per_node', type=int, default=1)
  parser.add_argument('--num_client_procs_per_node', type=int, default=1)
  parser.add_argument('--master_addr', type=str, default='localhost')
  parser.add_argument('--server_client_master_port', type=int, default=11110)
  args = parser.parse_args()

  print('--- Loading data partition ...')
  root_dir = osp.join(osp.dirname(osp.realpath(__file__)), args.dataset_root_dir)
  data_pidx = args.node_rank % args.num_dataset_partitions
  dataset = glt.distributed.DistDataset()
  dataset.load(
    root_dir=osp.join(root_dir, f'{args.dataset}-partitions'),
    partition_idx=data_pidx,
    graph_mode='ZERO_COPY',
    whole_node_label_file=osp.join(root_dir, f'{args.dataset}-label', 'label.pt'),
  )

  print('--- Launching server processes ...')
  num_servers = args.num_server_nodes * args.num_server_procs_per_node
  num_clients = args.num_client_nodes * args.num_client_procs_per_node
  torch.multiprocessing.spawn(
    run_server_proc,
    args=(
      args.num_server_procs_per_node,
      args.node_rank,
      num_servers,
      num_clients,
      dataset,
      args.master_addr,
      args.server_client_master_port,
    ),
    nprocs=args.num_server_procs_per_node,
    join=True,
  )
