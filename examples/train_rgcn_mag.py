"""Train an RGCN on a heterogeneous, ogbn-mag-shaped graph (paper
classification) with graphlearn_torch's heterogeneous NeighborLoader.

  python examples/train_rgcn_mag.py              # synthetic ogbn-mag-shaped graph
  python examples/train_rgcn_mag.py --dataset ogbn-mag --root /data/ogb   # the real one
  python examples/train_rgcn_mag.py --smoke      # a tiny run (CI)

ogbn-mag is read from OGB's unpacked files under ``--root``
(``<root>/ogbn_mag/raw``, ``split/time``; nothing is downloaded). Only its
papers have features: every other type gets the mean of its paper
neighbours' features (authors from the papers they wrote, fields of study
from their papers, institutions from their authors). The synthetic graph
(``glt.datasets.mag_like_graph``) has ogbn-mag's node types (paper,
author, institution, field_of_study) and edge types, with planted communities
so that paper labels are learnable from the neighbourhood; reverse edges are
added (``ToUndirected``) so messages reach papers from every type. Batches are
PyG ``HeteroData``; the model is an RGCN written as a ``HeteroConv`` of one
mean-aggregating ``SAGEConv`` per relation, summed over relations (RGCN with
its 1/|N_r(i)| normalization and per-relation root weights).
"""

import argparse
import logging
import os
import sys

import torch
import torch.nn.functional as F
import torch_geometric.transforms as T
from torch_geometric.nn import HeteroConv, SAGEConv

import graphlearn_torch as glt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import example_args  # noqa: E402

log = logging.getLogger('train_rgcn_mag')

SMOKE = {'num_papers': 2_000, 'epochs': 4, 'batch_size': 32}


class RGCN(torch.nn.Module):
  r"""Relational graph convolution over every edge type, then a linear
  classifier on papers.

  Args:
    edge_types: the relations.
    in_channels: the feature size of every node type.
    hidden: the hidden size.
    out_channels: paper classes.
    num_layers: convolution layers.
    dropout: dropout after each layer.
  """

  def __init__(self, edge_types, in_channels, hidden, out_channels, num_layers, dropout):
    super().__init__()
    sizes = [in_channels] + [hidden] * num_layers
    self.convs = torch.nn.ModuleList(
      HeteroConv({et: SAGEConv((sizes[i], sizes[i]), sizes[i + 1]) for et in edge_types})
      for i in range(num_layers)
    )
    self.head = torch.nn.Linear(hidden, out_channels)
    self.dropout = dropout

  def forward(self, x_dict, edge_index_dict):
    for conv in self.convs:
      out = conv(x_dict, edge_index_dict)
      x_dict = {t: F.dropout(h.relu(), self.dropout, self.training) for t, h in out.items()}
    return self.head(x_dict['paper'])


def load(args):
  r"""The graph (reverse edges added), with features on every node type and
  ``train_idx``/``val_idx``/``test_idx`` on papers."""
  if args.dataset == 'ogbn-mag':
    data = glt.datasets.load_ogb_node_dataset(args.root, 'ogbn-mag')
    fill_features(data)
  elif args.dataset == 'synthetic':
    data = glt.datasets.mag_like_graph(num_papers=args.num_papers, seed=args.seed)
    for split in ('train', 'val', 'test'):
      data['paper'][f'{split}_idx'] = data['paper'][f'{split}_mask'].nonzero().view(-1)
  else:
    raise SystemExit(f"unknown dataset {args.dataset!r}: 'synthetic' or 'ogbn-mag'")
  return T.ToUndirected()(data)


def fill_features(data) -> None:
  r"""Gives every featureless node type the mean features of its neighbours
  along the relations, in order, from types that have them."""
  for src, rel, dst in list(data.edge_types) * 2:  # a second pass reaches 2 hops
    for with_x, without in ((src, dst), (dst, src)):
      if 'x' in data[with_x] and 'x' not in data[without]:
        edge_index = data[src, rel, dst].edge_index
        ends = edge_index[0 if with_x == src else 1], edge_index[1 if with_x == src else 0]
        x = data[with_x].x
        total = torch.zeros(data[without].num_nodes, x.size(1)).index_add_(0, ends[1], x[ends[0]])
        count = torch.bincount(ends[1], minlength=data[without].num_nodes).clamp(min=1)
        data[without].x = total / count.unsqueeze(1)


def build_dataset(data) -> glt.data.Dataset:
  r"""A heterogeneous graphlearn_torch Dataset (in-edges, for message passing)."""
  ds = glt.data.Dataset(edge_dir='in')
  ds.init_graph(
    {et: data[et].edge_index for et in data.edge_types},
    graph_mode='CPU',
    num_nodes={t: data[t].num_nodes for t in data.node_types},
  )
  ds.init_node_features({t: data[t].x for t in data.node_types})
  ds.init_node_labels({'paper': data['paper'].y})
  return ds


def loader(ds, seeds, args, shuffle: bool):
  return glt.loader.NeighborLoader(
    ds, args.fanout, ('paper', seeds), batch_size=args.batch_size, shuffle=shuffle,
    device='cpu', seed=args.seed,
  )  # fmt: skip


def paper_forward(model) -> example_args.Forward:
  r"""``batch -> (logits, labels)`` of a batch's seed papers."""

  def forward(batch):
    size = batch['paper'].batch_size
    return model(batch.x_dict, batch.edge_index_dict)[:size], batch['paper'].y[:size]

  return forward


@torch.no_grad()
def evaluate(model, ds, seeds, args) -> float:
  model.eval()
  forward, correct = paper_forward(model), 0
  for batch in loader(ds, seeds, args, shuffle=False):
    out, y = forward(batch)
    correct += int((out.argmax(-1) == y).sum())
  return correct / max(seeds.numel(), 1)


def run(args) -> dict:
  torch.manual_seed(args.seed)
  data = load(args)
  ds = build_dataset(data)
  paper = data['paper']
  num_classes = int(paper.y.max()) + 1
  log.info(
    '%s: %s nodes, %d edges in %d relations, %d classes',
    args.dataset,
    {t: data[t].num_nodes for t in data.node_types},
    data.num_edges,
    len(data.edge_types),
    num_classes,
  )
  train_idx, val_idx, test_idx = (paper[f'{s}_idx'] for s in ('train', 'val', 'test'))
  model = RGCN(
    data.edge_types, paper.x.size(1), args.hidden, num_classes, len(args.fanout), args.dropout
  )
  opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
  splits = {'val': val_idx, 'test': test_idx}
  return example_args.fit(
    model, loader(ds, train_idx, args, shuffle=True), opt, paper_forward(model),
    lambda split: evaluate(model, ds, splits[split], args), args, log,
  )  # fmt: skip


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--dataset', default='synthetic', help="'synthetic' or 'ogbn-mag'")
  p.add_argument('--root', default='../shared/datasets/ogb', help='folder of the OGB files')
  p.add_argument('--num_papers', type=int, default=20_000, help='synthetic graph size')
  example_args.add_training_args(p, batch_size=128)
  return p


if __name__ == '__main__':
  example_args.main(parser(), run, SMOKE)
