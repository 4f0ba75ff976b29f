"""Edge cut and balance of each partitioner on real and synthetic graphs.

  python benchmarks/bench_partition_quality.py [--parts 2 4] [--planetoid DIR]
      [--community_nodes 1000000]

Cora and CiteSeer (Planetoid raw files, skipped when absent) and the 1 M-node
community graph (16 planted communities, 90% of the edges inside them),
partitioned by random, METIS and the streaming partitioner, METIS and the
streaming partitioner balancing the training nodes as well. The cut is the
share of directed edges whose ends lie in different partitions.
"""

import argparse
import os
from pathlib import Path

from results import Results, Table, add_results_argument

import graphlearn_torch as glt
from graphlearn_torch.partition import MetisPartitioner, RandomPartitioner, StreamingPartitioner

DEFAULT_PLANETOID = Path(__file__).resolve().parents[2] / 'shared' / 'datasets' / 'planetoid'


def graphs(planetoid: Path, community_nodes: int):
  """``(name, data)`` of each graph measured."""
  for name in ('cora', 'citeseer'):
    if (planetoid / f'ind.{name}.graph').exists():
      yield name, glt.datasets.load_planetoid(planetoid, name)
  yield (
    f'community, {community_nodes:,} nodes',
    glt.datasets.community_graph(
      community_nodes, num_classes=16, avg_degree=10, feature_dim=1, homophily=0.9, seed=0
    ),
  )


def partition_all(data, num_parts: int, workdir: str) -> dict:
  """The summary of each partitioner's run."""
  train = data.train_mask.nonzero().view(-1)
  common = dict(node_split=(train, None, None), progress=False)
  args = (data.num_nodes, data.edge_index)
  return {
    'random': RandomPartitioner(
      os.path.join(workdir, 'random'), num_parts, *args, seed=0, **common
    ).partition(),
    'metis': MetisPartitioner(
      os.path.join(workdir, 'metis'), num_parts, *args, balance_train=True, **common
    ).partition(),
    'streaming': StreamingPartitioner(
      os.path.join(workdir, 'streaming'), num_parts, *args, balance_train=True, **common
    ).partition(),
  }


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--parts', type=int, nargs='+', default=[2, 4])
  p.add_argument('--planetoid', type=Path, default=DEFAULT_PLANETOID)
  p.add_argument('--community_nodes', type=int, default=1_000_000)
  p.add_argument('--workdir', default='.bench/partition_quality')
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_partition_quality', args)
  rows = []
  for name, data in graphs(args.planetoid, args.community_nodes):
    for num_parts in args.parts:
      s = partition_all(data, num_parts, args.workdir)
      for kind in ('streaming', 'metis'):
        rows.append(
          [f'{name}, {num_parts} parts, {kind}', 100 * s[kind].cut_ratio,
           100 * s['random'].cut_ratio,
           s[kind].cut_ratio / s['metis'].cut_ratio, s[kind].cut_ratio / s['random'].cut_ratio,
           s[kind].node_balance(), s[kind].train_balance(), s[kind].seconds]
        )  # fmt: skip
        print(rows[-1], flush=True)
  table = results.add(
    Table(
      'quality',
      'Edge cut and balance by partitioner',
      [
        'graph, parts, partitioner',
        'edge cut, %',
        'random cut, %',
        'vs METIS',
        'vs random',
        'node balance',
        'train balance',
        'seconds',
      ],  # fmt: skip
      rows,
      chart={'label': 'graph, parts, partitioner', 'value': 'vs METIS'},
      note='Cut: the share of directed edges whose ends lie in different partitions; '
      'balance: the largest partition over the mean (nodes, training nodes). METIS and the '
      'streaming partitioner balance the training nodes too; imbalance 0.03 for both.',
    )
  )
  print(table.render())
  results.write()


if __name__ == '__main__':
  main()
