"""Link prediction with GraphSAGE and graphlearn_torch's LinkNeighborLoader.

  python examples/link_pred_sage.py                     # synthetic data (the default)
  python examples/link_pred_sage.py --dataset cora --root ../shared/datasets/planetoid
  python examples/link_pred_sage.py --smoke             # a tiny run (CI)

Holds out 10% of the undirected edges for test and 5% for validation, trains
an encoder on the rest with binary negative sampling (dot-product decoder),
and reports ROC-AUC of held-out edges against random non-edges.
"""

import argparse
import logging
import os
import sys

import torch
import torch.nn.functional as F
from torch_geometric.nn import GraphSAGE
from tqdm import tqdm

import graphlearn_torch as glt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import example_args  # noqa: E402

log = logging.getLogger('link_pred_sage')

SMOKE = {'dataset': 'synthetic', 'num_nodes': 1_000, 'epochs': 2}


def roc_auc(pos: torch.Tensor, neg: torch.Tensor) -> float:
  """ROC-AUC of positive against negative scores (Mann-Whitney U, ties halved)."""
  scores = torch.cat([pos, neg])
  order = scores.argsort()
  ranks = torch.empty_like(scores)
  ranks[order] = torch.arange(1, scores.numel() + 1, dtype=scores.dtype)
  # average ranks of ties
  uniq, inverse = torch.unique(scores, return_inverse=True)
  ranks = (
    torch.zeros(uniq.numel()).index_add_(0, inverse, ranks)[inverse]
    / torch.bincount(inverse)[inverse].float()
  )
  n_pos, n_neg = pos.numel(), neg.numel()
  return float((ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def split_edges(edge_index: torch.Tensor, num_nodes: int, seed: int):
  """Undirected train/val/test split; negatives for val/test are non-edges."""
  g = torch.Generator().manual_seed(seed)
  src, dst = edge_index
  pairs = torch.stack([src[src < dst], dst[src < dst]])
  pairs = pairs[:, torch.randperm(pairs.size(1), generator=g)]
  n_test, n_val = pairs.size(1) // 10, pairs.size(1) // 20
  test, val, train = (
    pairs[:, :n_test],
    pairs[:, n_test : n_test + n_val],
    pairs[:, n_test + n_val :],
  )
  existing = set((edge_index[0] * num_nodes + edge_index[1]).tolist())

  def negatives(n):
    out = []
    while len(out) < n:
      a, b = torch.randint(0, num_nodes, (2,), generator=g).tolist()
      if a != b and a * num_nodes + b not in existing:
        out.append((a, b))
    return torch.tensor(out).t()

  return train, (val, negatives(n_val)), (test, negatives(n_test))


@torch.no_grad()
def embed(model, ds, num_layers) -> torch.Tensor:
  model.eval()
  loader = glt.loader.NeighborLoader(ds, [-1] * num_layers, None, batch_size=4096, device='cpu')
  out = torch.empty(ds.num_nodes(), model.out_channels)
  for batch in loader:
    out[batch.n_id[: batch.batch_size]] = model(batch.x, batch.edge_index)[: batch.batch_size]
  return out


def evaluate(h, split) -> float:
  (pos, neg) = split
  return roc_auc((h[pos[0]] * h[pos[1]]).sum(-1), (h[neg[0]] * h[neg[1]]).sum(-1))


def run(args) -> dict:
  torch.manual_seed(args.seed)
  if args.dataset == 'synthetic':
    data = glt.datasets.community_graph(num_nodes=args.num_nodes, seed=args.seed)
  else:
    data = glt.datasets.load_planetoid(args.root, args.dataset)
  if args.normalize_features:  # as PyG's NormalizeFeatures
    data.x = data.x / data.x.sum(-1, keepdim=True).clamp(min=1)
  train, val, test = split_edges(data.edge_index, data.num_nodes, args.seed)
  # As PyG's RandomLinkSplit(disjoint_train_ratio=...): the edges supervised
  # in training are left out of the graph messages pass over while training,
  # so the model cannot read a target edge off the graph; evaluation embeds
  # with every training edge.
  num_sup = int(train.size(1) * args.disjoint_train_ratio)
  supervision, message = (train[:, :num_sup], train[:, num_sup:]) if num_sup else (train, train)

  def dataset(edges):
    ds = glt.data.Dataset(edge_dir='in')
    ds.init_graph(torch.cat([edges, edges.flip(0)], 1), graph_mode='CPU', num_nodes=data.num_nodes)
    ds.init_node_features(data.x)
    return ds

  train_ds, ds = dataset(message), dataset(train)
  log.info(
    '%s: %d nodes; %d train, %d val, %d test edges',
    args.dataset,
    data.num_nodes,
    train.size(1),
    val[0].size(1),
    test[0].size(1),
  )
  loader = glt.loader.LinkNeighborLoader(
    train_ds,
    args.fanout,
    edge_label_index=supervision,
    neg_sampling=glt.sampler.NegativeSampling('binary', args.neg_amount),
    batch_size=args.batch_size,
    shuffle=True,
    device='cpu',
    seed=args.seed,
  )
  model = GraphSAGE(
    data.num_features, args.hidden, len(args.fanout), args.hidden, dropout=args.dropout
  )
  opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
  best = example_args.BestEpoch('ROC-AUC')
  for epoch in range(1, args.epochs + 1):
    model.train()
    total = 0.0
    for batch in tqdm(loader, desc=f'epoch {epoch}', leave=False, disable=not args.progress):
      opt.zero_grad()
      h = model(batch.x, batch.edge_index)
      src, dst = batch.edge_label_index
      loss = F.binary_cross_entropy_with_logits((h[src] * h[dst]).sum(-1), batch.edge_label)
      loss.backward()
      opt.step()
      total += loss.item()
    h = embed(model, ds, len(args.fanout))
    val_auc = evaluate(h, val)
    best.update(epoch, val_auc, lambda h=h: evaluate(h, test))
    log.info('epoch %3d  loss %.4f  val ROC-AUC %.4f', epoch, total / len(loader), val_auc)
  return best.log(log)


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument(
    '--dataset', default='synthetic', choices=['synthetic', 'cora', 'citeseer', 'pubmed']
  )
  p.add_argument('--root', default='../shared/datasets/planetoid')
  p.add_argument('--num_nodes', type=int, default=5_000)
  example_args.add_training_args(p, hidden=128, dropout=0.0, lr=0.001, batch_size=256, epochs=60)
  p.add_argument('--disjoint_train_ratio', type=float, default=0.3)
  p.add_argument('--neg_amount', type=float, default=1.0)
  p.add_argument('--normalize_features', action='store_true')
  return p


if __name__ == '__main__':
  example_args.main(parser(), run, SMOKE)
