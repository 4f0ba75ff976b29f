"""The link-prediction example on real data (skipped without Cora)."""

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / 'examples'


def load_example(name):
  spec = importlib.util.spec_from_file_location(name, EXAMPLES / f'{name}.py')
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.mark.slow  # a whole example
def test_link_prediction_on_cora_reaches_auc(cora_root):
  example = load_example('link_pred_sage')
  args = example.parser().parse_args(
    ['--dataset', 'cora', '--root', str(cora_root), '--no-progress', '--seed', '0']
  )
  best = example.run(args)
  print(f'Cora link prediction: test ROC-AUC {best["test"]:.4f} (val {best["val"]:.4f})')
  assert best['test'] >= 0.85


def test_roc_auc_against_brute_force():
  import torch

  example = load_example('link_pred_sage')
  pos, neg = torch.tensor([0.9, 0.4, 0.4, 0.7]), torch.tensor([0.1, 0.4, 0.8])
  pairs = [(p > n) + 0.5 * (p == n) for p in pos.tolist() for n in neg.tolist()]
  assert abs(example.roc_auc(pos, neg) - sum(pairs) / len(pairs)) < 1e-6
