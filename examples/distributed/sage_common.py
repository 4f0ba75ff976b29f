"""What the distributed GraphSAGE examples share: partitions made on first
use, one training epoch, test accuracy."""

import os
import sys
import time
from typing import Tuple

import torch
import torch.nn.functional as F
from tqdm import tqdm

EXAMPLES = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ensure_partitions(
  dataset: str, raw_dataset_dir: str, dataset_root_dir: str, num_partitions: int, num_nodes: int
) -> str:
  r"""``{dataset_root_dir}/{dataset}-partitions``, partitioned first (edge_dir
  'in', METIS) when missing."""
  out = os.path.join(dataset_root_dir, f'{dataset}-partitions')
  if os.path.exists(os.path.join(out, 'META.json')):
    return out
  sys.path.insert(0, EXAMPLES)
  import partition_dataset

  argv = [
    '--dataset', dataset, '--dataset_root_dir', raw_dataset_dir, '--output_dir', out,
    '--num_partitions', str(num_partitions), '--edge_dir', 'in', '--num_nodes', str(num_nodes),
    '--seed', '0',
  ]  # fmt: skip
  partition_dataset.run(partition_dataset.parse_args(argv))
  return out


def train_epoch(model, loader, opt, desc: str, progress: bool) -> Tuple[float, float]:
  r"""One epoch over ``loader``; returns ``(mean loss, seconds)``. Under DDP,
  wrap the call in ``model.join()`` when ranks hold different numbers of
  batches."""
  model.train()
  start, total_loss, seen = time.perf_counter(), 0.0, 0
  for batch in tqdm(loader, desc=desc, disable=not progress):
    opt.zero_grad()
    out = model(batch.x, batch.edge_index)[: batch.batch_size]
    loss = F.cross_entropy(out, batch.y[: batch.batch_size])
    loss.backward()
    opt.step()
    total_loss += loss.item() * batch.batch_size
    seen += batch.batch_size
  return total_loss / max(seen, 1), time.perf_counter() - start


@torch.no_grad()
def test_accuracy(model, loader) -> torch.Tensor:
  r"""``[correct, total]`` over the loader's seeds."""
  model.eval()
  counts = torch.zeros(2)
  for batch in loader:
    out = model(batch.x, batch.edge_index)[: batch.batch_size]
    counts[0] += int((out.argmax(-1) == batch.y[: batch.batch_size]).sum())
    counts[1] += batch.batch_size
  return counts
