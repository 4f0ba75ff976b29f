# GLT 0.2.x's examples/distributed/partition_ogbn_dataset.py, written against
# GLT's API. Changed for this CPU machine: the dataset class (a synthetic
# stand-in, no download) and the graph's CUDA mode and device.
import argparse
import ast
import os.path as osp

import torch
from synthetic_ogbn import PygNodePropPredDataset  # GLT: from ogb.nodeproppred import ...

import graphlearn_torch as glt


def partition_dataset(
  ogbn_dataset: str,
  root_dir: str,
  num_partitions: int,
  num_nbrs: glt.NumNeighbors,
  chunk_size: int,
  cache_ratio: float,
):
  print(f'-- Loading {ogbn_dataset} ...')
  dataset = PygNodePropPredDataset(ogbn_dataset, root_dir)
  data = dataset[0]
  node_num = len(data.x)

  print('-- Saving label ...')
  label_dir = osp.join(root_dir, f'{ogbn_dataset}-label')
  glt.utils.ensure_dir(label_dir)
  torch.save(data.y.squeeze(), osp.join(label_dir, 'label.pt'))

  print('-- Partitioning training idx ...')
  split_idx = dataset.get_idx_split()
  train_idx = split_idx['train']
  train_idx = train_idx.split(train_idx.size(0) // num_partitions)
  train_idx_partitions_dir = osp.join(root_dir, f'{ogbn_dataset}-train-partitions')
  glt.utils.ensure_dir(train_idx_partitions_dir)
  for pidx in range(num_partitions):
    torch.save(train_idx[pidx], osp.join(train_idx_partitions_dir, f'partition{pidx}.pt'))

  print('-- Partitioning test idx ...')
  test_idx = split_idx['test']
  test_idx = test_idx.split(test_idx.size(0) // num_partitions)
  test_idx_partitions_dir = osp.join(root_dir, f'{ogbn_dataset}-test-partitions')
  glt.utils.ensure_dir(test_idx_partitions_dir)
  for pidx in range(num_partitions):
    torch.save(test_idx[pidx], osp.join(test_idx_partitions_dir, f'partition{pidx}.pt'))

  print('-- Initializing graph ...')
  csr_topo = glt.data.Topology(edge_index=data.edge_index, input_layout='COO')
  graph = glt.data.Graph(csr_topo, mode='CPU')  # GLT: mode='ZERO_COPY', device=0

  print('-- Sampling hotness ...')
  glt_sampler = glt.sampler.NeighborSampler(graph, num_nbrs)
  node_probs = []
  for pidx in range(num_partitions):
    seeds = train_idx[pidx]
    prob = glt_sampler.sample_prob(seeds, node_num)
    node_probs.append(prob.cpu())

  print('-- Partitioning graph and features ...')
  partitions_dir = osp.join(root_dir, f'{ogbn_dataset}-partitions')
  freq_partitioner = glt.partition.FrequencyPartitioner(
    output_dir=partitions_dir,
    num_parts=num_partitions,
    num_nodes=node_num,
    edge_index=data.edge_index,
    probs=node_probs,
    node_feat=data.x,
    chunk_size=chunk_size,
    cache_ratio=cache_ratio,
  )
  freq_partitioner.partition()


if __name__ == '__main__':
  parser = argparse.ArgumentParser(description='Arguments for partitioning ogbn datasets.')
  parser.add_argument('--dataset', type=str, default='ogbn-products')
  parser.add_argument('--root_dir', type=str, default='../../data/products')
  parser.add_argument('--num_partitions', type=int, default=2)
  parser.add_argument('--num_nbrs', type=ast.literal_eval, default='[15,10,5]')
  parser.add_argument('--chunk_size', type=int, default=10000)
  parser.add_argument('--cache_ratio', type=float, default=0.2)
  args = parser.parse_args()
  partition_dataset(
    ogbn_dataset=args.dataset,
    root_dir=osp.join(osp.dirname(osp.realpath(__file__)), args.root_dir),
    num_partitions=args.num_partitions,
    num_nbrs=args.num_nbrs,
    chunk_size=args.chunk_size,
    cache_ratio=args.cache_ratio,
  )
