"""GraphSAGE training epochs: the GPU path beside the CPU path and PyG's loader.

  python benchmarks/bench_gpu_train.py [--gpu 0] [--num_nodes 2449029] [--workers 8]

examples/train_sage_ogbn_products.py's training loop (its dataset set-up,
GraphSAGE and Adam, the seeds' cross-entropy) on its synthetic graph
(glt.datasets.community_graph) at ogbn-products' node count, fanout
[15, 10, 5], batch 1024, one epoch over the training nodes (a tenth of the
nodes) per row after a few warm-up batches, in this run:
  - graphlearn_torch, GPU path: the example's '--device cuda --graph_mode
    CUDA --split_ratio 0.2' (topology in GPU memory, the hottest fifth of
    the feature rows too, the rest read through UVA);
  - graphlearn_torch, CPU path: the example's defaults ('--device cpu'), the
    model on the CPU too, on every core;
  - PyG's torch_geometric.loader.NeighborLoader as its users run it for
    speed (--workers worker processes, persistent), each batch moved to the
    GPU, when pyg-lib or torch-sparse is importable (it samples with
    neither); the row says why when it is not.
Each row: the epoch's seconds and batches/s, and the ratio of batches/s to
the first measured row's (the GPU path's, where there is a GPU; without
one that row is skipped and says so).
"""

import argparse
import os
import sys
import time
from typing import Callable, Tuple

import torch
from bench_gpu_sampler import describe_machine
from results import Results, Table, add_results_argument
from torch_geometric.nn import GraphSAGE

import graphlearn_torch as glt

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'examples')
sys.path.insert(0, EXAMPLES)
import example_args  # noqa: E402
import train_sage_ogbn_products as train_sage  # noqa: E402

FANOUT = [15, 10, 5]
BATCH = 1024
WARMUP = 5  # batches of the warm-up epoch before the timed one


def time_epoch(model, loader, warmup, forward: Callable, lr: float) -> Tuple[float, int]:
  r"""``(seconds, batches)`` of one epoch of ``loader`` after one over the
  ``warmup`` loader, both by the example's ``train_epoch`` (its loss read
  back every batch, as the example does)."""
  opt = torch.optim.Adam(model.parameters(), lr=lr)
  example_args.train_epoch(model, warmup, opt, forward, 'warm-up', False)
  _, seconds = example_args.train_epoch(model, loader, opt, forward, 'epoch', False)
  return seconds, len(loader)


def glt_row(data, flags, args) -> Tuple[float, int]:
  r"""One epoch of the example's set-up with its command-line ``flags``."""
  ex = train_sage.parser().parse_args(
    ['--fanout', *map(str, FANOUT), '--batch_size', str(BATCH), '--seed', str(args.seed), *flags]
  )
  device = example_args.resolve_gpu_args(ex)
  ds = train_sage.build_dataset(data, ex)

  def loader(nodes):
    return glt.loader.NeighborLoader(
      ds, ex.fanout, nodes, batch_size=BATCH, shuffle=True, device=ex.device, seed=ex.seed
    )

  model = GraphSAGE(
    data.num_features, ex.hidden, len(FANOUT), int(data.y.max()) + 1, dropout=ex.dropout
  ).to(device)
  return time_epoch(
    model,
    loader(data.train_idx),
    loader(data.train_idx[: WARMUP * BATCH]),
    example_args.seed_forward(model),
    ex.lr,
  )


def pyg_row(data, device: torch.device, args) -> Tuple[float, int]:
  r"""One epoch with PyG's NeighborLoader (raises ImportError without
  pyg-lib or torch-sparse)."""
  from torch_geometric.loader import NeighborLoader

  def loader(nodes, workers):
    return NeighborLoader(
      data, num_neighbors=FANOUT, input_nodes=nodes, batch_size=BATCH, shuffle=True,
      num_workers=workers, persistent_workers=workers > 0,
    )  # fmt: skip

  model = GraphSAGE(data.num_features, 64, len(FANOUT), int(data.y.max()) + 1, dropout=0.5).to(
    device
  )
  forward = example_args.seed_forward(model)
  return time_epoch(
    model,
    loader(data.train_idx, args.workers),
    loader(data.train_idx[: WARMUP * BATCH], 0),
    lambda batch: forward(batch.to(device)),
    0.01,
  )


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--gpu', type=int, default=0)
  p.add_argument('--num_nodes', type=int, default=2_449_029)
  p.add_argument('--workers', type=int, default=8, help="PyG loader's worker processes")
  p.add_argument('--seed', type=int, default=0)
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_gpu_train', args)
  torch.set_num_threads(os.cpu_count() or 1)
  torch.manual_seed(args.seed)
  gpu = torch.cuda.is_available()
  device = torch.device('cuda', args.gpu) if gpu else torch.device('cpu')

  print(describe_machine(args.gpu))
  start = time.perf_counter()
  data = glt.datasets.community_graph(num_nodes=args.num_nodes, seed=args.seed)
  data.train_idx = data.train_mask.nonzero().view(-1)
  print(
    f'graph: {data.num_nodes:,} nodes, {data.num_edges:,} edges, {data.num_features} features, '
    f'{data.train_idx.numel():,} training nodes (built in {time.perf_counter() - start:.1f} s); '
    f'fanout {FANOUT}, batch {BATCH}'
  )
  rows = []  # (name, seconds, batches) or (name, why)
  if gpu:
    flags = ['--device', f'cuda:{args.gpu}', '--graph_mode', 'CUDA', '--split_ratio', '0.2']
    rows.append(('graphlearn_torch, GPU path', *glt_row(data, flags, args)))
  else:
    rows.append(('graphlearn_torch, GPU path', 'no GPU (torch.cuda.is_available() is False)'))
  rows.append(('graphlearn_torch, CPU path', *glt_row(data, ['--device', 'cpu'], args)))
  name = f'PyG NeighborLoader, {args.workers} workers, model on {device.type}'
  try:
    rows.append((name, *pyg_row(data, device, args)))
  except ImportError as e:
    rows.append((name, f'cannot sample here: {e}'))

  base = next((r[2] / r[1] for r in rows if len(r) == 3), None)
  table_rows = []
  for row in rows:
    if len(row) == 2:
      table_rows.append([row[0], None, None, None, None, row[1]])
    else:
      name, seconds, batches = row
      table_rows.append([name, seconds, batches, batches / seconds, batches / seconds / base, ''])
  table = Table(
    'train',
    f'GraphSAGE training epochs, {data.num_nodes:,} nodes, fanout {FANOUT}, batch {BATCH}',
    ['loader', 'epoch, s', 'batches', 'batches/s', 'vs the first measured row', 'why not'],
    table_rows,
    note=f'{describe_machine(args.gpu)}. The loop of examples/train_sage_ogbn_products.py.',
  )
  print(results.add(table).render())
  results.write()


if __name__ == '__main__':
  main()
