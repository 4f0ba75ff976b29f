"""A real model on real data: GraphSAGE on Cora trained with our NeighborLoader
reaches the accuracy of the same model trained full-batch."""

import logging

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
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


def mini_batch_acc(data, ds, loader, seed) -> float:
  r"""``best_test_acc`` of a model trained on ``loader``'s batches;
  inference through our loader, with all neighbors of every node."""
  everyone = glt.loader.NeighborLoader(ds, [-1, -1], None, batch_size=4096, device='cpu')

  def step(model, opt):
    for batch in loader:
      opt.zero_grad()
      out = model(batch.x, batch.edge_index)[: batch.batch_size]
      F.cross_entropy(out, batch.y[: batch.batch_size]).backward()
      opt.step()

  def predict(model):
    pred = torch.empty(data.num_nodes, dtype=torch.long)
    for batch in everyone:
      out = model(batch.x, batch.edge_index)[: batch.batch_size]
      pred[batch.n_id[: batch.batch_size]] = out.argmax(-1)
    return pred

  return best_test_acc(make_model(data, seed), step, predict, data)


def cora_dataset(cora_root):
  data = glt.datasets.load_planetoid(cora_root, 'cora')
  ds = glt.data.Dataset(edge_dir='in')
  ds.init_graph(data.edge_index, graph_mode='CPU', num_nodes=data.num_nodes)
  ds.init_node_features(data.x)
  ds.init_node_labels(data.y)
  return data, ds


@pytest.fixture(scope='module')
def cora(cora_root):
  r"""``(data, ds, our NeighborLoader's accuracy per seed)``, shared by the
  tests that compare against it."""
  data, ds = cora_dataset(cora_root)
  train_idx = data.train_mask.nonzero().view(-1)
  ours = []
  for seed in SEEDS:
    torch.manual_seed(seed)
    loader = glt.loader.NeighborLoader(
      ds, [10, 10], train_idx, batch_size=32, shuffle=True, device='cpu', seed=seed
    )
    ours.append(mini_batch_acc(data, ds, loader, seed))
  return data, ds, ours


@pytest.mark.slow  # models trained to accuracy
def test_neighbor_loader_matches_full_batch_on_cora(cora):
  data, _, mini = cora

  def full_step(model, opt):
    opt.zero_grad()
    out = model(data.x, data.edge_index)
    F.cross_entropy(out[data.train_mask], data.y[data.train_mask]).backward()
    opt.step()

  def full_predict(model):
    return model(data.x, data.edge_index).argmax(-1)

  full = [best_test_acc(make_model(data, s), full_step, full_predict, data) for s in SEEDS]
  full_acc, mini_acc = sum(full) / len(full), sum(mini) / len(mini)
  print(
    f'Cora GraphSAGE test accuracy: full-batch {full_acc:.4f} {full}, '
    f'NeighborLoader {mini_acc:.4f} {mini}'
  )
  assert full_acc > 0.75
  assert abs(mini_acc - full_acc) <= 0.02


@pytest.mark.slow  # models trained to accuracy
def test_pyg_node_loader_with_our_sampler_matches_ours_on_cora(cora):
  r"""PyG's own NodeLoader driven by PyGNeighborSampler trains GraphSAGE to
  the accuracy our NeighborLoader reaches (same fanouts, batches, seeds)."""
  from torch_geometric.loader import NodeLoader

  data, ds, ours = cora
  train_idx = data.train_mask.nonzero().view(-1)
  pyg_data = Data(x=data.x, y=data.y, edge_index=data.edge_index)
  pyg = []
  for seed in SEEDS:
    torch.manual_seed(seed)
    sampler = glt.sampler.PyGNeighborSampler(pyg_data, [10, 10], seed=seed)
    loader = NodeLoader(pyg_data, sampler, input_nodes=train_idx, batch_size=32, shuffle=True)
    pyg.append(mini_batch_acc(data, ds, loader, seed))
  ours_acc, pyg_acc = sum(ours) / len(ours), sum(pyg) / len(pyg)
  print(
    f'Cora GraphSAGE test accuracy: our NeighborLoader {ours_acc:.4f} {ours}, '
    f'PyG NodeLoader + PyGNeighborSampler {pyg_acc:.4f} {pyg}'
  )
  assert pyg_acc > 0.75
  assert abs(pyg_acc - ours_acc) <= 0.02
