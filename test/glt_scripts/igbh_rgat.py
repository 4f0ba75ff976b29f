# The RGAT benchmark reference's distributed training on IGBH partitions,
# written against GLT 0.2.x's API as that reference uses it, on the CPU (its
# --cpu_mode): one trainer per node, DistDataset.load with an input layout and
# a whole-label file, DistNeighborLoader with MpDistSamplingWorkerOptions
# (worker_devices a single torch.device), an RGAT (HeteroConv of GATConv),
# checkpoints with glt.utils.common.save_ckpt / load_ckpt, resumed by a later
# run. Prints "[Trainer r] ..." lines.
import argparse
import os.path as osp
import time

import torch
import torch.distributed
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch_geometric.nn import GATConv, HeteroConv, Linear

import graphlearn_torch as glt


class RGAT(torch.nn.Module):
  def __init__(self, etypes, in_channels, hidden_channels, out_channels, num_layers=2, heads=2):
    super().__init__()
    self.convs = torch.nn.ModuleList()
    for i in range(num_layers):
      width = in_channels if i == 0 else hidden_channels
      self.convs.append(
        HeteroConv(
          {
            etype: GATConv(
              (width, width), hidden_channels // heads, heads=heads, add_self_loops=False
            )
            for etype in etypes
          }
        )
      )
    self.linear = Linear(hidden_channels, out_channels)

  def forward(self, x_dict, edge_index_dict):
    for conv in self.convs:
      x_dict = conv(x_dict, edge_index_dict)
      x_dict = {k: F.leaky_relu(x) for k, x in x_dict.items()}
    return self.linear(x_dict['paper'])


def batch_logits(model, batch):
  x_dict = {k: v.to(torch.float32) for k, v in batch.x_dict.items()}
  return model(x_dict, batch.edge_index_dict)[: batch['paper'].batch_size]


@torch.no_grad()
def evaluate(model, loader):
  model.eval()
  correct = total = 0
  for batch in loader:
    pred = batch_logits(model, batch).argmax(-1)
    correct += int((pred == batch['paper'].y[: batch['paper'].batch_size]).sum())
    total += batch['paper'].batch_size
  counts = torch.tensor([correct, total], dtype=torch.float64)
  torch.distributed.all_reduce(counts)
  return float(counts[0] / counts[1])


def run(args):
  rank = args.node_rank
  world_size = args.num_nodes
  # The partitions assign edges by source (as the reference does), so each
  # node's out-edges are all in its partition: sample along them.
  edge_dir = 'out'
  dataset = glt.distributed.DistDataset(edge_dir=edge_dir)
  dataset.load(
    root_dir=osp.join(args.path, f'{args.dataset_size}-partitions'),
    partition_idx=rank,
    graph_mode='CPU',
    input_layout=args.layout,
    feature_with_gpu=False,
    whole_node_label_file={'paper': osp.join(args.path, f'{args.dataset_size}-label', 'label.pt')},
  )
  train_idx = torch.load(
    osp.join(args.path, f'{args.dataset_size}-train-partitions', f'partition{rank}.pt')
  )
  val_idx = torch.load(
    osp.join(args.path, f'{args.dataset_size}-val-partitions', f'partition{rank}.pt')
  )
  glt.distributed.init_worker_group(world_size, rank, group_name='distributed-rgat-trainer')
  torch.distributed.init_process_group(
    'gloo',
    init_method=f'tcp://{args.master_addr}:{args.training_pg_master_port}',
    world_size=world_size,
    rank=rank,
  )
  fan_out = [int(f) for f in args.fan_out.split(',')]

  def loader(idx, port, shuffle):
    return glt.distributed.DistNeighborLoader(
      data=dataset,
      num_neighbors=fan_out,
      input_nodes=('paper', idx),
      batch_size=args.batch_size,
      shuffle=shuffle,
      drop_last=False,
      edge_dir=edge_dir,
      collect_features=True,
      to_device=torch.device('cpu'),
      random_seed=args.random_seed,
      worker_options=glt.distributed.MpDistSamplingWorkerOptions(
        num_workers=1,
        worker_devices=torch.device('cpu'),
        worker_concurrency=4,
        master_addr=args.master_addr,
        master_port=port,
        channel_size='16GB',
        pin_memory=False,
        rpc_timeout=args.rpc_timeout,
        num_rpc_threads=2,
      ),
    )

  train_loader = loader(train_idx, args.train_loader_master_port, True)
  val_loader = loader(val_idx, args.val_loader_master_port, False)
  # A batch sampled along out-edges holds them reversed (messages flow to the seeds).
  etypes = sorted({glt.reverse_edge_type(e) for e in dataset.get_edge_types()})
  torch.manual_seed(args.random_seed)
  model = RGAT(etypes, args.in_channels, args.hidden_channels, 19)
  model = DistributedDataParallel(model, find_unused_parameters=True)
  optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
  start_epoch = 0
  if args.ckpt_seq_resume is not None:
    start_epoch = glt.utils.common.load_ckpt(
      args.ckpt_seq_resume, args.ckpt_dir, model.module, optimizer
    )
    print(f'[Trainer {rank}] Resumed from checkpoint {args.ckpt_seq_resume} at epoch {start_epoch}')
  for epoch in range(int(start_epoch), int(start_epoch) + args.epochs):
    model.train()
    start, losses = time.time(), []
    for batch in train_loader:
      optimizer.zero_grad()
      loss = F.cross_entropy(
        batch_logits(model, batch), batch['paper'].y[: batch['paper'].batch_size]
      )
      loss.backward()
      optimizer.step()
      losses.append(float(loss))
    acc = evaluate(model.module, val_loader)
    print(
      f'[Trainer {rank}] Epoch {epoch}: loss {sum(losses) / len(losses):.4f}, '
      f'Validation Accuracy: {acc:.4f} ({time.time() - start:.1f} s)'
    )
    if rank == 0 and args.ckpt_seq_save is not None:
      glt.utils.common.save_ckpt(
        args.ckpt_seq_save, args.ckpt_dir, model.module, optimizer, epoch + 1
      )
  train_loader.shutdown()
  val_loader.shutdown()
  torch.distributed.destroy_process_group()
  print(f'[Trainer {rank}] Exited')


if __name__ == '__main__':
  parser = argparse.ArgumentParser()
  parser.add_argument('--path', type=str, required=True)
  parser.add_argument('--dataset_size', type=str, default='tiny')
  parser.add_argument('--layout', type=str, default='COO', choices=['COO', 'CSC', 'CSR'])
  parser.add_argument('--num_nodes', type=int, default=2)
  parser.add_argument('--node_rank', type=int, default=0)
  parser.add_argument('--epochs', type=int, default=1)
  parser.add_argument('--batch_size', type=int, default=64)
  parser.add_argument('--fan_out', type=str, default='5,5')
  parser.add_argument('--in_channels', type=int, default=16)
  parser.add_argument('--hidden_channels', type=int, default=32)
  parser.add_argument('--learning_rate', type=float, default=0.01)
  parser.add_argument('--random_seed', type=int, default=42)
  parser.add_argument('--rpc_timeout', type=float, default=60)
  parser.add_argument('--master_addr', type=str, default='localhost')
  parser.add_argument('--training_pg_master_port', type=int, default=12111)
  parser.add_argument('--train_loader_master_port', type=int, default=12112)
  parser.add_argument('--val_loader_master_port', type=int, default=12113)
  parser.add_argument('--ckpt_dir', type=str, default='ckpt')
  parser.add_argument('--ckpt_seq_save', type=int, default=None)
  parser.add_argument('--ckpt_seq_resume', type=int, default=None)
  run(parser.parse_args())
