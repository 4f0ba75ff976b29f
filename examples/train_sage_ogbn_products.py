"""Train GraphSAGE on one machine with graphlearn_torch's NeighborLoader.

  python examples/train_sage_ogbn_products.py             # synthetic data (the default)
  python examples/train_sage_ogbn_products.py --dataset ogbn-products --root /data/ogb
  python examples/train_sage_ogbn_products.py --dataset cora --root ../shared/datasets/planetoid
  python examples/train_sage_ogbn_products.py --smoke     # a tiny run (CI)
  python examples/train_sage_ogbn_products.py --device cuda --graph_mode ZERO_COPY --split_ratio 0.2

ogbn-products (or any homogeneous ogbn-* node dataset) is read from OGB's
unpacked files under ``--root`` (``<root>/ogbn_products/raw``, ``split/``);
nothing is downloaded.

The loop is a plain PyG training loop: only the Dataset and the loader come
from graphlearn_torch (needing neither pyg-lib nor torch-sparse).
"""

import argparse
import logging
import os
import sys

import torch
from torch_geometric.nn import GraphSAGE

import graphlearn_torch as glt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import example_args  # noqa: E402

log = logging.getLogger('train_sage')

SMOKE = {'num_nodes': 2_000, 'epochs': 2, 'batch_size': 64}


def load(args):
  r"""A ``Data`` with ``train_idx``, ``val_idx`` and ``test_idx``."""
  if args.dataset.startswith('ogbn-'):
    return glt.datasets.load_ogb_node_dataset(args.root, args.dataset)
  if args.dataset == 'synthetic':
    data = glt.datasets.community_graph(num_nodes=args.num_nodes, seed=args.seed)
  else:
    data = glt.datasets.load_planetoid(args.root, args.dataset)
  for split in ('train', 'val', 'test'):
    data[f'{split}_idx'] = data[f'{split}_mask'].nonzero().view(-1)
  return data


def build_dataset(data, args) -> glt.data.Dataset:
  r"""The dataset, placed as the GPU flags say: the graph in ``--graph_mode``
  and, with a CUDA ``--device``, the ``--split_ratio`` hottest feature rows
  (by in-degree) in GPU memory and the rest read through UVA."""
  device = example_args.resolve_gpu_args(args)
  gpu = device.index if device.type == 'cuda' else None
  ds = glt.data.Dataset(edge_dir='in')
  ds.init_graph(data.edge_index, graph_mode=args.graph_mode, device=gpu, num_nodes=data.num_nodes)
  ds.init_node_features(
    data.x,
    sort_func=glt.data.sort_by_in_degree if args.split_ratio > 0 else None,
    split_ratio=args.split_ratio,
    device=gpu,
    with_gpu=device.type == 'cuda',
  )
  ds.init_node_labels(data.y)
  return ds


@torch.no_grad()
def evaluate(model, ds, nodes, args) -> float:
  model.eval()
  loader = glt.loader.NeighborLoader(
    ds, [-1] * len(args.fanout), nodes, batch_size=1024, device=args.device
  )
  correct = 0
  for batch in loader:
    out = model(batch.x, batch.edge_index)[: batch.batch_size]
    correct += int((out.argmax(-1) == batch.y[: batch.batch_size]).sum())
  return correct / max(nodes.numel(), 1)


def run(args) -> dict:
  torch.manual_seed(args.seed)
  data = load(args)
  ds = build_dataset(data, args)
  log.info(
    '%s: %d nodes, %d edges, %d features, %d classes',
    args.dataset,
    data.num_nodes,
    data.num_edges,
    data.num_features,
    int(data.y.max()) + 1,
  )
  example_args.log_placement(log, ds, example_args.resolve_gpu_args(args))
  train_idx, val_idx, test_idx = data.train_idx, data.val_idx, data.test_idx
  loader = glt.loader.NeighborLoader(
    ds,
    args.fanout,
    train_idx,
    batch_size=args.batch_size,
    shuffle=True,
    device=args.device,
    seed=args.seed,
  )
  model = GraphSAGE(
    data.num_features, args.hidden, len(args.fanout), int(data.y.max()) + 1, dropout=args.dropout
  ).to(example_args.resolve_gpu_args(args))
  opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
  splits = {'val': val_idx, 'test': test_idx}
  return example_args.fit(
    model, loader, opt, example_args.seed_forward(model),
    lambda split: evaluate(model, ds, splits[split], args), args, log, args.eval_every,
  )  # fmt: skip


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument(
    '--dataset', default='synthetic', help="'synthetic', 'cora', 'citeseer', 'pubmed', 'ogbn-*'"
  )
  p.add_argument(
    '--root', default='../shared/datasets/planetoid', help='folder of the Planetoid or OGB files'
  )
  p.add_argument('--num_nodes', type=int, default=20_000, help='synthetic graph size')
  p.add_argument('--eval_every', type=int, default=1)
  example_args.add_training_args(p, epochs=20)
  example_args.add_gpu_args(p)
  return p


if __name__ == '__main__':
  example_args.main(parser(), run, SMOKE)
