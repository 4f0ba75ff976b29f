"""PyG's own temporal sampling (``torch_geometric.sampler.NeighborSampler``
with node times, on pyg-lib), measured as bench_temporal.py asks.

  PYG_PYTHON benchmarks/pyg_temporal_peer.py DIR --threads 2 --fanout 15 10 5 --seed 0

Run by bench_temporal.py --pyg-python in an environment of its own (``make
pyg-peer``). DIR holds the graph in CSC (indptr.npy, indices.npy), the seed
batches (seeds.npy) and, per node-time order, the node times
(``node_time_<i>.npy``) and per bound the seed times of every batch
(``seed_time_<j>.npy``). Prints one JSON line: for each sampler, its
construction time and rates.

PyG is configured as its users would for speed: a ``Data`` with a ``time``
attribute, ``NeighborSampler(data, num_neighbors, time_attr='time',
temporal_strategy=...)`` (PyG sorts each node's neighbors by time once, at
construction, timed here as ours is) and ``sample_from_nodes`` with the
seeds' times, the call PyG's ``NodeLoader`` makes for every batch; a
sampler with node times is disjoint in PyG, as ours is. The rows without
time are PyG's plain and disjoint samplers.
"""

import glob
import json
import time

from peer_protocol import load, parse_peer_args
from pyg_peer import load_edge_index, rates, versions


def main():
  args = parse_peer_args(__doc__.split('\n')[0])
  from torch_geometric.data import Data
  from torch_geometric.sampler import NeighborSampler

  edge_index, num_nodes = load_edge_index(args.dir)
  seeds = load(args.dir, 'seeds')
  orders = len(glob.glob(f'{args.dir}/node_time_*.npy'))
  num_bounds = len(glob.glob(f'{args.dir}/seed_time_*.npy'))
  bounds = [load(args.dir, f'seed_time_{j}') for j in range(num_bounds)]
  plain = Data(edge_index=edge_index, num_nodes=num_nodes)
  samplers = {
    'plain': NeighborSampler(plain, num_neighbors=args.fanout),
    'disjoint': NeighborSampler(plain, num_neighbors=args.fanout, disjoint=True),
  }
  out = {name: rates(s, seeds, None, args.batches) for name, s in samplers.items()}
  for i in range(orders):
    data = Data(edge_index=edge_index, num_nodes=num_nodes, time=load(args.dir, f'node_time_{i}'))
    for strategy in ('uniform', 'last'):
      t = time.perf_counter()
      sampler = NeighborSampler(
        data, num_neighbors=args.fanout, time_attr='time', temporal_strategy=strategy
      )
      built = time.perf_counter() - t
      for j, seed_times in enumerate(bounds):
        got = rates(sampler, seeds, seed_times, args.batches)
        out[f'{strategy} {i} {j}'] = {**got, 'built_s': built}
  print(json.dumps({**versions(args.threads), 'samplers': out}))


if __name__ == '__main__':
  main()
