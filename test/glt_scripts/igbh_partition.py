# The RGAT benchmark reference's partition step (IGBH, heterogeneous),
# written against GLT 0.2.x's API as that reference uses it: the seed split
# saved per partition, RandomPartitioner over every relation and its reverse,
# features in one pass or in a second stage (build_partition_feature) in
# fp16, and the CSC/CSR rewrite of each relation's partition files
# (load_graph_partition_data -> DistDataset.init_graph -> export_topology ->
# rows.pt/cols.pt). Nothing here needs a GPU.
import argparse
import os.path as osp

import numpy as np
import torch

import graphlearn_torch as glt

RELATIONS = [
  ('paper', 'cites', 'paper'),
  ('paper', 'written_by', 'author'),
  ('author', 'affiliated_to', 'institute'),
  ('paper', 'topic', 'fos'),
]


class IGBHeteroDataset:
  def __init__(self, path, dataset_size, use_fp16):
    base = osp.join(path, dataset_size, 'processed')
    dtype = torch.float16 if use_fp16 else torch.float32
    self.feat_dict = {
      t: torch.from_numpy(np.load(osp.join(base, t, 'node_feat.npy'))).to(dtype)
      for t in ('paper', 'author', 'institute', 'fos')
    }
    self.label = torch.from_numpy(np.load(osp.join(base, 'paper', 'node_label_19.npy'))).long()
    self.edge_dict = {}
    for src, rel, dst in RELATIONS:
      edges = torch.from_numpy(np.load(osp.join(base, f'{src}__{rel}__{dst}', 'edge_index.npy')))
      self.edge_dict[(src, rel, dst)] = (edges[:, 0], edges[:, 1])
      if src != dst:
        self.edge_dict[(dst, f'rev_{rel}', src)] = (edges[:, 1], edges[:, 0])
    n = self.label.size(0)
    shuffled = torch.randperm(n, generator=torch.Generator().manual_seed(42))
    self.train_idx = shuffled[: int(0.6 * n)]
    self.val_idx = shuffled[int(0.6 * n) : int(0.8 * n)]


def partition_dataset(args):
  data = IGBHeteroDataset(args.path, args.dataset_size, args.use_fp16)
  node_num = {k: v.shape[0] for k, v in data.feat_dict.items()}
  print('-- Saving label ...')
  label_dir = osp.join(args.dst_path, f'{args.dataset_size}-label')
  glt.utils.ensure_dir(label_dir)
  torch.save(data.label, osp.join(label_dir, 'label.pt'))

  print('-- Partitioning training and validation idx ...')
  for name, idx in (('train', data.train_idx), ('val', data.val_idx)):
    out = osp.join(args.dst_path, f'{args.dataset_size}-{name}-partitions')
    glt.utils.ensure_dir(out)
    for pidx, part in enumerate(
      idx.split(idx.size(0) // args.num_partitions)[: args.num_partitions]
    ):
      torch.save(part, osp.join(out, f'partition{pidx}.pt'))

  print('-- Partitioning graph and features ...')
  partitions_dir = osp.join(args.dst_path, f'{args.dataset_size}-partitions')
  feat_dtype = torch.float16 if args.use_fp16 else torch.float32
  partitioner = glt.partition.RandomPartitioner(
    output_dir=partitions_dir,
    num_parts=args.num_partitions,
    num_nodes=node_num,
    edge_index=data.edge_dict,
    node_feat=data.feat_dict,
    node_feat_dtype=feat_dtype,
    edge_assign_strategy='by_src',
    chunk_size=args.chunk_size,
  )
  partitioner.partition(bool(args.with_feature))
  if not args.with_feature:
    print('-- Building features of each partition ...')
    for pidx in range(args.num_partitions):
      glt.partition.base.build_partition_feature(
        root_dir=partitions_dir,
        partition_idx=pidx,
        chunk_size=args.chunk_size,
        node_feat=data.feat_dict,
        node_feat_dtype=feat_dtype,
        edge_feat=None,
        edge_feat_dtype=None,
      )

  if args.layout in ('CSC', 'CSR'):
    print(f'-- Converting the graph partitions to {args.layout} ...')
    for pidx in range(args.num_partitions):
      for etype in data.edge_dict:
        edge_dir = osp.join(partitions_dir, f'part{pidx}', 'graph', glt.typing.as_str(etype))
        graph = glt.partition.base.load_graph_partition_data(edge_dir, torch.device('cpu'))
        dataset = glt.distributed.DistDataset(edge_dir='in' if args.layout == 'CSC' else 'out')
        dataset.init_graph(
          edge_index={etype: graph.edge_index},
          edge_ids={etype: graph.eids},
          layout='COO',
          graph_mode='CPU',
        )
        indptr, indices, _ = dataset.get_graph(etype).export_topology()
        if args.layout == 'CSC':
          torch.save(indices, osp.join(edge_dir, 'rows.pt'))
          torch.save(indptr, osp.join(edge_dir, 'cols.pt'))
        else:
          torch.save(indptr, osp.join(edge_dir, 'rows.pt'))
          torch.save(indices, osp.join(edge_dir, 'cols.pt'))
  print('-- Done')


if __name__ == '__main__':
  parser = argparse.ArgumentParser()
  parser.add_argument('--path', type=str, required=True)
  parser.add_argument('--dst_path', type=str, required=True)
  parser.add_argument('--dataset_size', type=str, default='tiny')
  parser.add_argument('--num_partitions', type=int, default=2)
  parser.add_argument('--chunk_size', type=int, default=10000)
  parser.add_argument('--use_fp16', action='store_true')
  parser.add_argument('--with_feature', type=int, default=1)
  parser.add_argument('--layout', type=str, default='COO', choices=['COO', 'CSC', 'CSR'])
  partition_dataset(parser.parse_args())
