"""PyG's own LinkNeighborLoader (on pyg-lib), measured as bench_link.py asks.

  PYG_PYTHON benchmarks/pyg_link_peer.py DIR --threads 2 --fanout 15 10 5 --batches 20

Run by bench_link.py --pyg-python in an environment of its own (``make
pyg-peer``), so PyG's loader never meets ours in a process. DIR holds the
graph in CSC (indptr.npy, indices.npy) and the seed edges
(edge_label_index.npy, ``--batches`` batches of them). Prints one JSON line
with the figures.

PyG is configured as its users would for speed: a ``Data`` with the graph
and a ``--dim``-wide fp32 feature table (random: the gather's speed does
not depend on the values), ``LinkNeighborLoader(data, num_neighbors,
edge_label_index=..., neg_sampling=dict(mode='binary', amount=1))`` with
pyg-lib's ``neighbor_sample`` underneath, in the training process
(``num_workers=0``, as ours is measured), the graph converted to CSC at
construction, which is not timed.
"""

import json

import torch
from peer_protocol import load, parse_peer_args, timed
from pyg_peer import load_edge_index, versions


def main():
  args = parse_peer_args(__doc__.split('\n')[0])
  from torch_geometric.data import Data
  from torch_geometric.loader import LinkNeighborLoader

  edge_index, num_nodes = load_edge_index(args.dir)
  data = Data(x=torch.randn(num_nodes, args.dim), edge_index=edge_index, num_nodes=num_nodes)
  seeds = load(args.dir, 'edge_label_index')
  loader = LinkNeighborLoader(
    data,
    args.fanout,
    edge_label_index=seeds,
    neg_sampling=dict(mode='binary', amount=1),
    batch_size=seeds.size(1) // args.batches,
    shuffle=False,
  )
  batches = iter(loader)
  run = timed(lambda: next(batches).edge_index.size(1), 1, args.batches - 1)
  print(json.dumps({**versions(args.threads), **run.rates()}))


if __name__ == '__main__':
  main()
