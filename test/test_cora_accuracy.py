"""A real model on real data: GraphSAGE on Cora trained with our NeighborLoader
reaches the accuracy of the same model trained full-batch."""

import logging

import torch
import torch.nn.functional as F
from torch_geometric.nn import GraphSAGE

import graphlearn_torch as glt

log = logging.getLogger(__name__)
SEEDS = (0, 1, 2)
EPOCHS = 100


def make_model(data, seed):
  torch.manual_seed(seed)
  return GraphSAGE(data.num_features, 64, 2, 7, dropout=0.5)


def best_test_acc(model, step, predict, data) -> float:
  """Trains with ``step`` and returns test accuracy at the best validation epoch."""
  opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
  best_val, best_test = -1.0, 0.0
  for _ in range(EPOCHS):
    model.train()
    step(model, opt)
    model.eval()
    with torch.no_grad():
      pred = predict(model)
    val = float((pred[data.val_mask] == data.y[data.val_mask]).float().mean())
    if val > best_val:
      best_val = val
      best_test = float((pred[data.test_mask] == data.y[data.test_mask]).float().mean())
  return best_test


def test_neighbor_loader_matches_full_batch_on_cora(cora_root):
  data = glt.datasets.load_planetoid(cora_root, 'cora')
  ds = glt.data.Dataset(edge_dir='in')
  ds.init_graph(data.edge_index, graph_mode='CPU', num_nodes=data.num_nodes)
  ds.init_node_features(data.x)
  ds.init_node_labels(data.y)
  train_idx = data.train_mask.nonzero().view(-1)

  def full_step(model, opt):
    opt.zero_grad()
    out = model(data.x, data.edge_index)
    F.cross_entropy(out[data.train_mask], data.y[data.train_mask]).backward()
    opt.step()

  def full_predict(model):
    return model(data.x, data.edge_index).argmax(-1)

  full, mini = [], []
  for seed in SEEDS:
    full.append(best_test_acc(make_model(data, seed), full_step, full_predict, data))
    loader = glt.loader.NeighborLoader(
      ds, [10, 10], train_idx, batch_size=32, shuffle=True, device='cpu', seed=seed
    )
    # inference through our loader too: all neighbors of every node
    everyone = glt.loader.NeighborLoader(ds, [-1, -1], None, batch_size=4096, device='cpu')

    def mini_step(model, opt, loader=loader):
      for batch in loader:
        opt.zero_grad()
        out = model(batch.x, batch.edge_index)[: batch.batch_size]
        F.cross_entropy(out, batch.y[: batch.batch_size]).backward()
        opt.step()

    def mini_predict(model, everyone=everyone):
      pred = torch.empty(data.num_nodes, dtype=torch.long)
      for batch in everyone:
        pred[batch.n_id[: batch.batch_size]] = model(batch.x, batch.edge_index)[
          : batch.batch_size
        ].argmax(-1)
      return pred

    mini.append(best_test_acc(make_model(data, seed), mini_step, mini_predict, data))
  full_acc, mini_acc = sum(full) / len(full), sum(mini) / len(mini)
  print(
    f'Cora GraphSAGE test accuracy: full-batch {full_acc:.4f} {full}, '
    f'NeighborLoader {mini_acc:.4f} {mini}'
  )
  assert full_acc > 0.75
  assert abs(mini_acc - full_acc) <= 0.02
