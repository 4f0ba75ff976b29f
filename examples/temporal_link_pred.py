"""Temporal link prediction: which items will users buy next? PyG's LinkLoader
on graphlearn_torch's temporal sampler, on a relational-style graph.

  python examples/temporal_link_pred.py                 # synthetic data (the default)
  python examples/temporal_link_pred.py --smoke         # a tiny run (CI)

The data is a small relational database: users, items, and purchases (a
user, an item, a time). Each user and item has a latent taste; users buy
items they like, over --time_steps steps. Items have features (their taste,
noisy); users have none, so a user's taste can only be read off what they
bought before. The purchases before --val_time train the model, those up to
--test_time validate it and the rest test it.

Every purchase is in the graph, as in RelBench: PyG's ``LinkLoader`` samples
with ``glt.sampler.PyGNeighborSampler(time_attr='time')``, so a purchase at
time t sees only purchases of time <= t - 1 (its ``edge_label_time``). Every
batch is checked for leakage: no sampled edge later than its seed's time.
The model is a heterogeneous GraphSAGE with a dot-product decoder, trained
with binary negatives; it reports ROC-AUC of future purchases against
random user-item pairs.
"""

import argparse
import logging
import os
import sys

import torch
import torch.nn.functional as F
from torch_geometric.data import HeteroData
from torch_geometric.loader import LinkLoader
from torch_geometric.nn import HeteroConv, Linear, SAGEConv
from torch_geometric.sampler import NegativeSampling
from tqdm import tqdm

import graphlearn_torch as glt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import example_args  # noqa: E402
from link_pred_sage import roc_auc  # noqa: E402

log = logging.getLogger('temporal_link_pred')

BUYS = ('user', 'buys', 'item')
BOUGHT_BY = ('item', 'rev_buys', 'user')
SMOKE = {'num_users': 300, 'num_items': 100, 'num_purchases': 6_000, 'epochs': 2}


def purchases_graph(args) -> HeteroData:
  """The synthetic database as a HeteroData: ``user`` and ``item`` nodes
  (items with features), purchases both ways with their ``time``."""
  g = torch.Generator().manual_seed(args.seed)
  taste_user = torch.randn(args.num_users, args.taste_dim, generator=g)
  taste_item = torch.randn(args.num_items, args.taste_dim, generator=g)
  users = torch.randint(0, args.num_users, (args.num_purchases,), generator=g)
  # Each purchase picks, among 20 random items, the one the user likes best
  # (Gumbel noise keeps it a draw).
  candidates = torch.randint(0, args.num_items, (args.num_purchases, 20), generator=g)
  liking = (taste_user[users].unsqueeze(1) * taste_item[candidates]).sum(-1)
  gumbel = -torch.log(-torch.log(torch.rand(liking.shape, generator=g).clamp(1e-9, 1 - 1e-9)))
  items = candidates.gather(1, (liking + gumbel).argmax(1, keepdim=True)).view(-1)
  time = torch.randint(0, args.time_steps, (args.num_purchases,), generator=g)
  order = time.argsort(stable=True)
  users, items, time = users[order], items[order], time[order]
  data = HeteroData()
  data['user'].num_nodes = args.num_users
  data['user'].x = torch.ones(args.num_users, 1)
  data['item'].x = taste_item + 0.5 * torch.randn(taste_item.shape, generator=g)
  data[BUYS].edge_index = torch.stack([users, items])
  data[BUYS].time = time
  data[BOUGHT_BY].edge_index = torch.stack([items, users])
  data[BOUGHT_BY].time = time
  return data


class Encoder(torch.nn.Module):
  """Heterogeneous GraphSAGE: each node type projected to ``hidden``, then
  ``num_layers`` rounds of SAGE messages along both purchase directions."""

  def __init__(self, in_dims, hidden: int, num_layers: int):
    super().__init__()
    self.project = torch.nn.ModuleDict({t: Linear(d, hidden) for t, d in in_dims.items()})
    self.convs = torch.nn.ModuleList(
      HeteroConv({BUYS: SAGEConv(hidden, hidden), BOUGHT_BY: SAGEConv(hidden, hidden)})
      for _ in range(num_layers)
    )

  def forward(self, x_dict, edge_index_dict):
    x_dict = {t: self.project[t](x) for t, x in x_dict.items()}
    for i, conv in enumerate(self.convs):
      x_dict = conv(x_dict, edge_index_dict)
      if i < len(self.convs) - 1:
        x_dict = {t: x.relu() for t, x in x_dict.items()}
    return x_dict


def check_no_leakage(batch, data: HeteroData) -> None:
  """Raises if a batch holds an edge later than the time of the seed whose
  subgraph holds it (its ``batch`` entry numbers the seed purchase)."""
  seed_time = batch[BUYS].edge_label_time
  for etype in (BUYS, BOUGHT_BY):
    store = batch[etype]
    if store.e_id.numel() == 0:
      continue
    edge_time = data[etype].time[store.e_id]
    seed = batch[etype[-1]].batch[store.edge_index[1]]
    late = edge_time > seed_time[seed]
    if bool(late.any()):
      raise AssertionError(f'leakage: {int(late.sum())} {etype} edges later than their seed')


def loader(data: HeteroData, sampler, mask: torch.Tensor, args, shuffle: bool) -> LinkLoader:
  """Purchases of ``mask`` as seed edges, each at its time minus one."""
  return LinkLoader(
    data,
    sampler,
    edge_label_index=(BUYS, data[BUYS].edge_index[:, mask]),
    edge_label_time=data[BUYS].time[mask] - 1,
    neg_sampling=NegativeSampling('binary', args.neg_amount),
    batch_size=args.batch_size,
    shuffle=shuffle,
  )


def scores(model, batch) -> torch.Tensor:
  h = model(batch.x_dict, batch.edge_index_dict)
  src, dst = batch[BUYS].edge_label_index
  return (h['user'][src] * h['item'][dst]).sum(-1)


@torch.no_grad()
def evaluate(model, batches, data) -> float:
  model.eval()
  pos, neg = [], []
  for batch in batches:
    check_no_leakage(batch, data)
    s, label = scores(model, batch), batch[BUYS].edge_label
    pos.append(s[label == 1])
    neg.append(s[label == 0])
  return roc_auc(torch.cat(pos), torch.cat(neg))


def run(args) -> dict:
  torch.manual_seed(args.seed)
  data = purchases_graph(args)
  time = data[BUYS].time
  train, val = time < args.val_time, (time >= args.val_time) & (time < args.test_time)
  test = time >= args.test_time
  log.info(
    'synthetic purchases: %d users, %d items, %d purchases over %d steps; '
    '%d train, %d val, %d test',
    args.num_users, args.num_items, args.num_purchases, args.time_steps,
    int(train.sum()), int(val.sum()), int(test.sum()),
  )  # fmt: skip
  sampler = glt.sampler.PyGNeighborSampler(
    data, args.fanout, time_attr='time', temporal_strategy=args.temporal_strategy, seed=args.seed
  )
  train_loader = loader(data, sampler, train, args, shuffle=True)
  val_loader, test_loader = (loader(data, sampler, m, args, shuffle=False) for m in (val, test))
  model = Encoder({t: data[t].x.size(1) for t in data.node_types}, args.hidden, len(args.fanout))
  opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
  best = example_args.BestEpoch('ROC-AUC')
  for epoch in range(1, args.epochs + 1):
    model.train()
    total = 0.0
    for batch in tqdm(train_loader, desc=f'epoch {epoch}', leave=False, disable=not args.progress):
      check_no_leakage(batch, data)
      opt.zero_grad()
      loss = F.binary_cross_entropy_with_logits(scores(model, batch), batch[BUYS].edge_label)
      loss.backward()
      opt.step()
      total += loss.item()
    val_auc = evaluate(model, val_loader, data)
    best.update(epoch, val_auc, lambda: evaluate(model, test_loader, data))
    log.info('epoch %3d  loss %.4f  val ROC-AUC %.4f', epoch, total / len(train_loader), val_auc)
  log.info('no batch saw the future: every sampled edge was at most its seed time')
  return best.log(log)


def parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--num_users', type=int, default=5_000)
  p.add_argument('--num_items', type=int, default=1_000)
  p.add_argument('--num_purchases', type=int, default=100_000)
  p.add_argument('--taste_dim', type=int, default=8)
  p.add_argument('--time_steps', type=int, default=100)
  p.add_argument('--val_time', type=int, default=70, help='purchases before it train')
  p.add_argument('--test_time', type=int, default=85, help='purchases from it on test')
  p.add_argument('--temporal_strategy', default='uniform', choices=['uniform', 'last'])
  p.add_argument('--neg_amount', type=float, default=1.0)
  example_args.add_training_args(p, hidden=64, dropout=0.0, lr=0.005, batch_size=512, epochs=10)
  return p


if __name__ == '__main__':
  example_args.main(parser(), run, SMOKE)
