"""Negative sampling and LinkNeighborLoader on an ogbn-products-size graph.

  python benchmarks/bench_link.py [--threads 2] [--scale 1.0]

Same seeded power-law graph as bench_sampler.py. Measures, in one run:
  - strict random negative sampling (pairs checked against the graph) in
    pairs/s, beside PyG's torch_geometric.utils.negative_sampling on the
    same edges;
  - LinkNeighborLoader batches/s: fanout [15, 10, 5], 1024 seed edges per
    batch, binary negative sampling (amount 1), node features 100-dim fp32.
"""

import argparse
import time

import torch
from results import Results, Table, add_results_argument
from torch_geometric.utils import negative_sampling
from workloads import build_graph

import graphlearn_torch as glt


def timed(fn, repeat: int) -> float:
  fn()
  t = time.perf_counter()
  for _ in range(repeat):
    fn()
  return (time.perf_counter() - t) / repeat


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--threads', type=int, default=2)
  p.add_argument('--scale', type=float, default=1.0)
  p.add_argument('--pairs', type=int, default=1_000_000)
  p.add_argument('--pyg_pairs', type=int, default=100_000, help='PyG is slower: fewer pairs')
  p.add_argument('--batches', type=int, default=20)
  p.add_argument('--seed', type=int, default=0)
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_link', args)
  torch.set_num_threads(args.threads)
  ds, num_edges, _, build_s = build_graph(args.scale, args.seed)
  print(
    f'graph: {ds.num_nodes():,} nodes, {num_edges:,} directed edges '
    f'(CSR in {build_s:.1f} s, {args.threads} threads)'
  )

  neg = glt.sampler.RandomNegativeSampler(ds.graph, edge_dir=ds.edge_dir)
  ours = args.pairs / timed(lambda: neg.sample(args.pairs), 3)
  src, dst, _, _ = ds.graph.topo.to_coo()
  edge_index = torch.stack([src, dst])
  pyg = args.pyg_pairs / timed(
    lambda: negative_sampling(edge_index, ds.num_nodes(), args.pyg_pairs, method='sparse'), 1
  )
  edge_index = src = dst = None  # free 3 GB before the loader runs

  ds.init_node_features(torch.randn(ds.num_nodes(), 100))
  seeds = torch.randint(0, ds.num_nodes(), (2, 1024 * args.batches))
  loader = glt.loader.LinkNeighborLoader(
    ds,
    [15, 10, 5],
    edge_label_index=seeds,
    neg_sampling='binary',
    batch_size=1024,
    device='cpu',
    seed=args.seed,
  )
  it = iter(loader)
  next(it)
  t, n = time.perf_counter(), 1
  for _ in it:
    n += 1
  bps = (n - 1) / (time.perf_counter() - t)

  table = results.add(
    Table(
      'link',
      f'Link prediction on the CPU, {args.threads} threads',
      ['measure', 'graphlearn_torch', 'peer', 'peer figure', 'ours vs it'],
      [
        ['strict negative pairs/s', ours, 'PyG negative_sampling (sparse)', pyg, ours / pyg],
        ['LinkNeighborLoader batches/s', bps, None, None, None],
      ],
      note='Negative pairs are checked against the graph. LinkNeighborLoader: fanout '
      '[15, 10, 5], 1024 seed edges a batch, binary negatives (amount 1), 100-dim fp32 '
      "features. PyG's LinkNeighborLoader needs pyg-lib or torch-sparse: with pyg-lib, "
      "bench_sampler.py's PyG row measures the sampler it calls.",
    )
  )
  print(table.render())
  results.write()


if __name__ == '__main__':
  main()
