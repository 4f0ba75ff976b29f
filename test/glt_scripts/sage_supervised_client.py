# GLT 0.2.x's examples/distributed/server_client_mode/sage_supervised_client.py,
# written against GLT's API. Changed for this CPU machine, and only there:
# devices are the CPU (GLT: cuda), the process group uses gloo (GLT: nccl).
import argparse
import os.path as osp
import time
from typing import List

import torch
import torch.distributed
import torch.nn.functional as F
from ogb.nodeproppred import Evaluator
from torch.nn.parallel import DistributedDataParallel
from torch_geometric.nn import GraphSAGE

import graphlearn_torch as glt


@torch.no_grad()
def test(model, test_loader, dataset_name):
  evaluator = Evaluator(name=dataset_name)
  model.eval()
  xs = []
  y_true = []
  for i, batch in enumerate(test_loader):
    if i == 0:
      device = batch.x.device
    x = model(batch.x, batch.edge_index)[: batch.batch_size]
    xs.append(x.cpu())
    y_true.append(batch.y[: batch.batch_size].cpu())
    del batch
  xs = [t.to(device) for t in xs]
  y_true = [t.to(device) for t in y_true]
  y_pred = torch.cat(xs, dim=0).argmax(dim=-1, keepdim=True)
  y_true = torch.cat(y_true, dim=0).unsqueeze(-1)
  test_acc = evaluator.eval({'y_true': y_true, 'y_pred': y_pred})['acc']
  return test_acc


def run_client_proc(
  proc_rank: int,
  num_client_procs_per_node: int,
  node_rank: int,
  num_servers: int,
  num_clients: int,
  server_rank_list: List[int],
  dataset_name: str,
  in_channels: int,
  out_channels: int,
  train_path_list: List[str],
  test_path_list: List[str],
  epochs: int,
  batch_size: int,
  master_addr: str,
  server_client_port: int,
  pg_master: str,
  training_pg_master_port: int,
  train_loader_master_port: int,
  test_loader_master_port: int,
):
  client_rank = node_rank * num_client_procs_per_node + proc_rank
  print(f'-- [Client {client_rank}] Initializing client ...')
  glt.distributed.init_client(
    num_servers=num_servers,
    num_clients=num_clients,
    client_rank=client_rank,
    master_addr=master_addr,
    master_port=server_client_port,
    num_rpc_threads=4,
    client_group_name='dist_train_supervised_sage_client',
  )

  current_ctx = glt.distributed.get_context()
  current_device = torch.device(
    'cpu'
  )  # GLT: torch.device(current_ctx.rank % torch.cuda.device_count())
  server_device_count = glt.distributed.request_server(server_rank_list[0], torch.cuda.device_count)
  print(f'-- [Client {client_rank}] Server {server_rank_list[0]} has {server_device_count} GPUs')

  print(f'-- [Client {client_rank}] Initializing training process group of PyTorch ...')
  torch.distributed.init_process_group(
    backend='gloo',  # GLT: 'nccl'
    rank=current_ctx.rank,
    world_size=current_ctx.world_size,
    init_method=f'tcp://{pg_master}:{training_pg_master_port}',
  )

  # Create distributed neighbor loader on remote server for training.
  print(f'-- [Client {client_rank}] Creating training dataloader ...')
  train_loader = glt.distributed.DistNeighborLoader(
    data=None,
    num_neighbors=[15, 10, 5],
    input_nodes=train_path_list,
    batch_size=batch_size,
    shuffle=True,
    collect_features=True,
    to_device=current_device,
    worker_options=glt.distributed.RemoteDistSamplingWorkerOptions(
      server_rank=server_rank_list,
      num_workers=1,
      worker_devices=[torch.device('cpu')],  # GLT: cuda devices
      worker_concurrency=4,
      master_addr=master_addr,
      master_port=train_loader_master_port,
      buffer_size='1GB',
      prefetch_size=2,
      worker_key='train',
    ),
  )

  # Create distributed neighbor loader on remote server for testing.
  print(f'-- [Client {client_rank}] Creating testing dataloader ...')
  test_loader = glt.distributed.DistNeighborLoader(
    data=None,
    num_neighbors=[15, 10, 5],
    input_nodes=test_path_list,
    batch_size=batch_size,
    shuffle=False,
    collect_features=True,
    to_device=current_device,
    worker_options=glt.distributed.RemoteDistSamplingWorkerOptions(
      server_rank=server_rank_list,
      num_workers=1,
      worker_devices=[torch.device('cpu')],  # GLT: cuda devices
      worker_concurrency=4,
      master_addr=master_addr,
      master_port=test_loader_master_port,
      buffer_size='1GB',
      prefetch_size=2,
      worker_key='test',
    ),
  )

  # Define model and optimizer.
  print(f'-- [Client {client_rank}] Initializing model and optimizer ...')
  model = GraphSAGE(
    in_channels=in_channels,
    hidden_channels=256,
    num_layers=3,
    out_channels=out_channels,
  ).to(current_device)
  model = DistributedDataParallel(model)  # GLT: device_ids=[current_device.index]
  optimizer = torch.optim.Adam(model.parameters(), lr=0.001)

  # Train and test.
  print(f'-- [Client {client_rank}] Start training and testing ...')
  for epoch in range(0, epochs):
    model.train()
    start = time.time()
    for batch in train_loader:
      optimizer.zero_grad()
      out = model(batch.x, batch.edge_index)[: batch.batch_size].log_softmax(dim=-1)
      loss = F.nll_loss(out, batch.y[: batch.batch_size])
      loss.backward()
      optimizer.step()
    end = time.time()
    print(
      f'-- [Client {client_rank}] Epoch: {epoch:03d}, Loss: {loss:.4f}, Epoch Time: {end - start}'
    )
    torch.distributed.barrier()
    # Test accuracy.
    if epoch == 0 or epoch > (epochs // 2):
      test_acc = test(model, test_loader, dataset_name)
      print(f'-- [Client {client_rank}] Test Accuracy: {test_acc:.4f}')
      torch.distributed.barrier()

  print(f'-- [Client {client_rank}] Shutdowning ...')
  glt.distributed.shutdown_client()
  print(f'-- [Client {client_rank}] Exited ...')


if __name__ == '__main__':
  parser = argparse.ArgumentParser(
    description='Arguments for distributed training of supervised SAGE with servers.'
  )
  parser.add_argument('--dataset', type=str, default='ogbn-products')
  parser.add_argument('--dataset_root_dir', type=str, default='../../../data/products')
  parser.add_argument('--in_channel', type=int, default=100)
  parser.add_argument('--out_channel', type=int, default=47)
  parser.add_argument('--num_dataset_partitions', type=int, default=2)
  parser.add_argument('--num_server_nodes', type=int, default=2)
  parser.add_argument('--num_client_nodes', type=int, default=2)
  parser.add_argument('--node_rank', type=int, default=0)
  parser.add_argument('--num_server_procs_per_node', type=int, default=1)
  parser.add_argument('--num_client_procs_per_node', type=int, default=1)
  parser.add_argument('--epochs', type=int, default=10)
  parser.add_argument('--batch_size', type=int, default=512)
  parser.add_argument('--master_addr', type=str, default='localhost')
  parser.add_argument('--server_client_master_port', type=int, default=11110)
  parser.add_argument('--pg_master', type=str, default='localhost')
  parser.add_argument('--training_pg_master_port', type=int, default=11111)
  parser.add_argument('--train_loader_master_port', type=int, default=11112)
  parser.add_argument('--test_loader_master_port', type=int, default=11113)
  args = parser.parse_args()

  root_dir = osp.join(osp.dirname(osp.realpath(__file__)), args.dataset_root_dir)
  num_servers = args.num_server_nodes * args.num_server_procs_per_node
  num_clients = args.num_client_nodes * args.num_client_procs_per_node
  # Every client samples from every server; each server reads its own seed file.
  server_rank_list = list(range(num_servers))
  train_path_list = [
    osp.join(root_dir, f'{args.dataset}-train-partitions', f'partition{s}.pt')
    for s in server_rank_list
  ]
  test_path_list = [
    osp.join(root_dir, f'{args.dataset}-test-partitions', f'partition{s}.pt')
    for s in server_rank_list
  ]

  print('--- Launching client processes ...')
  torch.multiprocessing.spawn(
    run_client_proc,
    args=(
      args.num_client_procs_per_node,
      args.node_rank,
      num_servers,
      num_clients,
      server_rank_list,
      args.dataset,
      args.in_channel,
      args.out_channel,
      train_path_list,
      test_path_list,
      args.epochs,
      args.batch_size,
      args.master_addr,
      args.server_client_master_port,
      args.pg_master,
      args.training_pg_master_port,
      args.train_loader_master_port,
      args.test_loader_master_port,
    ),
    nprocs=args.num_client_procs_per_node,
    join=True,
  )
