"""Partition a node-classification dataset for distributed training.

  python examples/partition_dataset.py                           # synthetic, 2 parts, METIS
  python examples/partition_dataset.py --dataset cora \\
      --dataset_root_dir ../shared/datasets/planetoid --partitioner random --num_partitions 4
  python examples/partition_dataset.py --dataset ogbn-products --dataset_root_dir /data/ogb
  python examples/partition_dataset.py --smoke                   # a tiny run (CI)

Writes ``<output_dir>`` in graphlearn_torch's partition format (see
docs/partition_format.md): per partition its edges, feature rows and its share
of the train/val/test seeds, plus the partition books and the labels. Load a
partition with ``graphlearn_torch.distributed.DistDataset().load(output_dir, i)``.
OGB datasets are read from their unpacked files (nothing is downloaded).
"""

import argparse
import logging
import os

import torch

import graphlearn_torch as glt

log = logging.getLogger('partition_dataset')

PARTITIONERS = {
  'random': glt.partition.RandomPartitioner,
  'frequency': glt.partition.FrequencyPartitioner,
  'metis': glt.partition.MetisPartitioner,
}


def load(args):
  """A PyG Data with x, y, edge_index and train/val/test ids."""
  if args.dataset == 'synthetic':
    data = glt.datasets.community_graph(
      num_nodes=args.num_nodes, feature_dim=args.feature_dim, homophily=0.8, seed=args.seed
    )
  elif args.dataset in ('cora', 'citeseer', 'pubmed'):
    data = glt.datasets.load_planetoid(args.dataset_root_dir, args.dataset)
  elif args.dataset.startswith('ogbn-'):
    return glt.datasets.load_ogb_node_dataset(args.dataset_root_dir, args.dataset)
  else:
    raise SystemExit(f'unknown dataset {args.dataset!r}')
  data.train_idx = data.train_mask.nonzero().view(-1)
  data.val_idx = data.val_mask.nonzero().view(-1)
  data.test_idx = data.test_mask.nonzero().view(-1)
  return data


def access_probs(data, args):
  """Per partition, the probability that sampling from its share of the
  training seeds touches each node (what FrequencyPartitioner places by)."""
  ds = glt.data.Dataset(edge_dir=args.edge_dir)
  ds.init_graph(data.edge_index, graph_mode='CPU', num_nodes=data.num_nodes)
  sampler = glt.sampler.NeighborSampler(
    ds.graph, args.num_nbrs, device='cpu', edge_dir=args.edge_dir, seed=args.seed
  )
  chunks = torch.tensor_split(
    data.train_idx[torch.randperm(data.train_idx.numel())], args.num_partitions
  )
  return [sampler.sample_prob(chunk, data.num_nodes).float() for chunk in chunks]


def run(args) -> glt.partition.PartitionSummary:
  torch.manual_seed(args.seed)
  data = load(args)
  log.info(
    '%s: %d nodes, %d edges; %d train, %d val, %d test seeds',
    args.dataset,
    data.num_nodes,
    data.edge_index.size(1),
    data.train_idx.numel(),
    data.val_idx.numel(),
    data.test_idx.numel(),
  )
  kwargs = dict(
    node_feat=data.x,
    edge_assign_strategy='by_src' if args.edge_dir == 'out' else 'by_dst',
    chunk_size=args.chunk_size,
    node_labels=data.y,
    node_split=(data.train_idx, data.val_idx, data.test_idx),
    book=args.book,
  )
  if args.partitioner == 'frequency':
    kwargs.update(probs=access_probs(data, args), cache_ratio=args.cache_ratio)
  elif args.partitioner == 'metis':
    kwargs.update(balance_train=args.balance_train, balance_edges=args.balance_edges)
  else:
    kwargs.update(seed=args.seed)
  partitioner = PARTITIONERS[args.partitioner](
    args.output_dir, args.num_partitions, data.num_nodes, data.edge_index, **kwargs
  )
  return partitioner.partition()  # logs the summary table


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--dataset', default='synthetic', help="'synthetic', 'cora', 'citeseer', 'ogbn-*'")
  p.add_argument('--dataset_root_dir', default='../shared/datasets/planetoid')
  p.add_argument('--output_dir', default=None, help='default: <dataset>-partitions')
  p.add_argument('--num_partitions', type=int, default=2)
  p.add_argument('--partitioner', choices=sorted(PARTITIONERS), default='metis')
  p.add_argument('--book', choices=['tensor', 'range'], default='tensor')
  p.add_argument(
    '--edge_dir',
    choices=['in', 'out'],
    default='in',
    help="sampling direction the partitions serve: 'in' assigns edges by_dst",
  )
  p.add_argument('--balance_train', action=argparse.BooleanOptionalAction, default=True)
  p.add_argument('--balance_edges', action='store_true')
  p.add_argument(
    '--num_nbrs',
    type=int,
    nargs='+',
    default=[15, 10, 5],
    help='fanouts for the frequency partitioner',
  )
  p.add_argument('--cache_ratio', type=float, default=0.2)
  p.add_argument('--chunk_size', type=int, default=10000)
  p.add_argument('--num_nodes', type=int, default=100_000, help='synthetic graph size')
  p.add_argument('--feature_dim', type=int, default=32, help='synthetic feature size')
  p.add_argument('--seed', type=int, default=0)
  p.add_argument('--smoke', action='store_true', help='a tiny run: 2,000 synthetic nodes')
  args = p.parse_args(argv)
  if args.smoke:
    args.num_nodes = 2_000
  if args.output_dir is None:
    args.output_dir = f'{args.dataset}-partitions'
  args.output_dir = os.path.abspath(args.output_dir)
  return args


if __name__ == '__main__':
  logging.basicConfig(level=logging.INFO, format='%(asctime)s %(name)s: %(message)s')
  run(parse_args())
