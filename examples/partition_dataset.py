"""Partition a node-classification dataset for distributed training.

  python examples/partition_dataset.py                           # synthetic, 2 parts, METIS
  python examples/partition_dataset.py --dataset cora \\
      --dataset_root_dir ../shared/datasets/planetoid --partitioner random --num_partitions 4
  python examples/partition_dataset.py --dataset ogbn-products --dataset_root_dir /data/ogb
  python examples/partition_dataset.py --dataset ogbn-mag --dataset_root_dir /data/ogb  # hetero
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
from torch_geometric.data import HeteroData

import graphlearn_torch as glt

log = logging.getLogger('partition_dataset')

PARTITIONERS = {
  'random': glt.partition.RandomPartitioner,
  'frequency': glt.partition.FrequencyPartitioner,
  'metis': glt.partition.MetisPartitioner,
}


def load(args):
  """A PyG Data with x, y, edge_index and train/val/test ids (a HeteroData
  with those per type for a heterogeneous OGB dataset)."""
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


def graph_inputs(data) -> dict:
  r"""The partitioner's inputs of a ``Data``, or of a ``HeteroData`` (ogbn-mag)
  as dicts by type: node counts, edges, features, labels and splits."""
  splits = ('train_idx', 'val_idx', 'test_idx')
  if not isinstance(data, HeteroData):
    return dict(
      num_nodes=data.num_nodes, edge_index=data.edge_index, node_feat=data.x,
      node_labels=data.y, node_split=tuple(data[s] for s in splits),
    )  # fmt: skip
  labelled = [t for t in data.node_types if 'train_idx' in data[t]]
  return dict(
    num_nodes={t: data[t].num_nodes for t in data.node_types},
    edge_index={et: data[et].edge_index for et in data.edge_types},
    node_feat={t: data[t].x for t in data.node_types if 'x' in data[t]} or None,
    node_labels={t: data[t].y for t in data.node_types if 'y' in data[t]} or None,
    node_split=tuple({t: data[t][s] for t in labelled} for s in splits),
  )


def run(args) -> glt.partition.PartitionSummary:
  torch.manual_seed(args.seed)
  data = load(args)
  inputs = graph_inputs(data)
  seeds = [sum(ids.numel() for ids in (s.values() if isinstance(s, dict) else [s]))
           for s in inputs['node_split']]  # fmt: skip
  log.info(
    '%s: %d nodes, %d edges; %d train, %d val, %d test seeds',
    args.dataset, data.num_nodes, data.num_edges, *seeds,
  )  # fmt: skip
  kwargs = dict(
    node_feat=inputs['node_feat'],
    edge_assign_strategy='by_src' if args.edge_dir == 'out' else 'by_dst',
    chunk_size=args.chunk_size,
    node_labels=inputs['node_labels'],
    node_split=inputs['node_split'],
    book=args.book,
  )
  if args.partitioner == 'frequency':
    if isinstance(data, HeteroData):
      raise SystemExit('this example weighs homogeneous graphs only for --partitioner frequency')
    kwargs.update(probs=access_probs(data, args), cache_ratio=args.cache_ratio)
  elif args.partitioner == 'metis':
    kwargs.update(balance_train=args.balance_train, balance_edges=args.balance_edges)
  else:
    kwargs.update(seed=args.seed)
  partitioner = PARTITIONERS[args.partitioner](
    args.output_dir, args.num_partitions, inputs['num_nodes'], inputs['edge_index'], **kwargs
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
