"""Negative sampling and LinkNeighborLoader on an ogbn-products-size graph.

  python benchmarks/bench_link.py [--threads 2] [--scale 1.0] \\
      [--pyg-python .venv-pyg/bin/python]

Same seeded power-law graph as bench_sampler.py. Measures, in one run:
  - strict random negative sampling (pairs checked against the graph) in
    pairs/s, beside PyG's torch_geometric.utils.negative_sampling on the
    same edges;
  - LinkNeighborLoader batches/s and sampled edges/s: fanout [15, 10, 5],
    1024 seed edges per batch, binary negative sampling (amount 1), node
    features 100-dim fp32; with --pyg-python (or PYG_PYTHON), beside PyG's
    own LinkNeighborLoader on pyg-lib on the same graph and seed edges, in
    its own environment and process (pyg_link_peer.py, ``make pyg-peer``).
"""

import argparse
import os
import time

import torch
from peer_protocol import timed as timed_batches
from results import Results, Table, add_results_argument
from torch_geometric.utils import negative_sampling
from workloads import build_graph, run_peer_script

import graphlearn_torch as glt


def timed(fn, repeat: int) -> float:
  fn()
  t = time.perf_counter()
  for _ in range(repeat):
    fn()
  return (time.perf_counter() - t) / repeat


def negative_rates(ds, args):
  r"""``(ours, PyG's)`` strict negative pairs/s on ``ds``'s graph."""
  neg = glt.sampler.RandomNegativeSampler(ds.graph, edge_dir=ds.edge_dir)
  ours = args.pairs / timed(lambda: neg.sample(args.pairs), 3)
  src, dst, _, _ = ds.graph.topo.to_coo()
  edge_index = torch.stack([src, dst])
  pyg = args.pyg_pairs / timed(
    lambda: negative_sampling(edge_index, ds.num_nodes(), args.pyg_pairs, method='sparse'), 1
  )
  return ours, pyg


def loader_rates(ds, seeds, args) -> dict:
  r"""Our LinkNeighborLoader's figures over ``seeds``' batches, the first
  untimed, as pyg_link_peer.py reports PyG's."""
  loader = glt.loader.LinkNeighborLoader(
    ds,
    args.fanout,
    edge_label_index=seeds,
    neg_sampling='binary',
    batch_size=args.batch_size,
    device='cpu',
    seed=args.seed,
  )
  batches = iter(loader)
  run = timed_batches(lambda: next(batches).edge_index.size(1), 1, args.batches - 1)
  return run.rates()


def pyg_loader_rates(ds, seeds, args) -> dict:
  r"""PyG's LinkNeighborLoader's figures on the same graph and seed edges,
  from pyg_link_peer.py in PyG's environment."""
  topo = ds.graph.topo
  arrays = {'indptr': topo.indptr, 'indices': topo.indices, 'edge_label_index': seeds}
  options = ['--threads', str(args.threads), '--batches', str(args.batches)]
  options += ['--dim', '100', '--fanout', *map(str, args.fanout)]
  return run_peer_script('pyg_link_peer.py', args.pyg_python, arrays, options)


def link_table(negatives, ours, pyg, threads: int) -> Table:
  rows = [['strict negative pairs/s', negatives[0], 'PyG negative_sampling (sparse)',
           negatives[1], negatives[0] / negatives[1]]]  # fmt: skip
  peer = f'PyG {pyg["pyg"]} LinkNeighborLoader (pyg-lib {pyg["pyg_lib"]})' if pyg else None
  for measure, key in (('batches/s', 'batches_per_s'), ('sampled edges/s', 'edges_per_s')):
    theirs = pyg[key] if pyg else None
    rows.append([f'LinkNeighborLoader {measure}', ours[key], peer, theirs,
                 ours[key] / theirs if pyg else None])  # fmt: skip
  return Table(
    'link',
    f'Link prediction on the CPU, {threads} threads',
    ['measure', 'graphlearn_torch', 'peer', 'peer figure', 'ours vs it'],
    rows,
    note='Negative pairs are checked against the graph. LinkNeighborLoader: fanout '
    '[15, 10, 5], 1024 seed edges a batch, binary negatives (amount 1), 100-dim fp32 '
    "features gathered; PyG's in its own environment and process, in the training process "
    '(num_workers=0) as ours, on the same graph and seed edges. Compare edges/s where batches '
    'differ in size.',
  )


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--threads', type=int, default=2)
  p.add_argument('--scale', type=float, default=1.0)
  p.add_argument('--pairs', type=int, default=1_000_000)
  p.add_argument('--pyg_pairs', type=int, default=100_000, help='PyG is slower: fewer pairs')
  p.add_argument('--batches', type=int, default=20)
  p.add_argument('--batch_size', type=int, default=1024)
  p.add_argument('--fanout', type=int, nargs='+', default=[15, 10, 5])
  p.add_argument('--seed', type=int, default=0)
  p.add_argument(
    '--pyg-python',
    default=os.environ.get('PYG_PYTHON'),
    help="python of PyG's environment (make pyg-peer): its LinkNeighborLoader in this run",
  )
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_link', args)
  torch.set_num_threads(args.threads)
  ds, num_edges, _, build_s = build_graph(args.scale, args.seed)
  print(
    f'graph: {ds.num_nodes():,} nodes, {num_edges:,} directed edges '
    f'(CSR in {build_s:.1f} s, {args.threads} threads)'
  )
  negatives = negative_rates(ds, args)
  ds.init_node_features(torch.randn(ds.num_nodes(), 100))
  seeds = torch.randint(0, ds.num_nodes(), (2, args.batch_size * args.batches))
  ours = loader_rates(ds, seeds, args)
  pyg = pyg_loader_rates(ds, seeds, args) if args.pyg_python else None
  table = results.add(link_table(negatives, ours, pyg, args.threads))
  print(table.render())
  results.write()


if __name__ == '__main__':
  main()
