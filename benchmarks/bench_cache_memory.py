"""Host memory of worker mode with and without the remote-row cache.

  python benchmarks/bench_cache_memory.py [--num_nodes 1000000] [--batches 60]
                                          [--cache_ratio 0.25]

bench_dist_sampling.py's graph and METIS partitions (with and without a
cache of the other partition's hottest ``--cache_ratio`` of rows); 2
trainers x 2 sampling processes, fanout [15, 10, 5], batches of 1024 seeds,
features collected. Each trainer, after its ``--batches`` batches and
before it shuts its loader down, sums the proportional set size (PSS: a
page shared by k processes counts 1/k in each) of itself and every process
under it: the job's host memory, all processes counted once. The
shared-memory channels (512 MB per trainer, backed as batches reach them)
are counted apart, and in the last column. Rows: the partitions on RPC
(``GLT_SHARE_HOST_PARTITIONS=0``, each trainer standing for a host) and
mapped in place (one host).
"""

import argparse
import collections
import os
import time

import numpy as np
import torch
from bench_dist_sampling import (
  BATCH,
  FANOUT,
  SPAWN,
  free_port,
  partition,
  trainer_seeds,
)
from memory import tree_pss_mb
from processes import next_report
from results import Results, Table, add_results_argument

import graphlearn_torch as glt


def trainer(rank, root, ports, batches, share, results):
  os.environ['GLT_SHARE_HOST_PARTITIONS'] = '1' if share else '0'  # its samplers inherit it
  torch.set_num_threads(1)
  dist = glt.distributed
  dist.init_worker_group(2, rank, 'bench')
  options = dist.MpDistSamplingWorkerOptions(
    num_workers=2, worker_concurrency=4, master_addr='127.0.0.1', master_port=ports[1],
    channel_size='512MB',
  )  # fmt: skip
  ds = dist.DistDataset(edge_dir='in').load(root, rank, graph_mode='CPU', feature_with_gpu=False)
  seeds = trainer_seeds(ds.node_pb, rank, batches)
  loader = dist.DistNeighborLoader(
    ds, FANOUT, seeds, batch_size=BATCH, edge_dir='in', collect_features=True,
    worker_options=options,
  )  # fmt: skip
  batch_iter = iter(loader)
  for _ in range(batches):
    next(batch_iter)
  pss, _ = tree_pss_mb()
  channels = pss['channels']
  results.put((rank, collections.Counter(channel=channels, rest=sum(pss.values()) - channels)))
  loader.shutdown()


def job_memory(root: str, batches: int, share: bool) -> collections.Counter:
  r"""The job's PSS (MB) by ``'channel'`` and ``'rest'``."""
  results = SPAWN.Queue()
  ports = (free_port(), free_port())
  procs = [
    SPAWN.Process(target=trainer, args=(r, root, ports, batches, share, results)) for r in range(2)
  ]
  for p in procs:
    p.start()
  try:
    deadline = time.monotonic() + 900
    reports = [next_report(results, procs, deadline, 'a trainer gave no report')[1] for _ in procs]
  finally:
    for p in procs:
      p.join(120)
      if p.is_alive():
        p.kill()
  return sum(reports, collections.Counter())


def cache_mb(root: str) -> float:
  r"""The bytes of every partition's cache (rows and ids), in MB."""
  total = 0
  for part in range(2):
    for name in ('cache_feats.npy', 'cache_ids.npy'):
      total += np.load(os.path.join(root, f'part{part}', 'node_feat', name), mmap_mode='r').nbytes
  return total / 2**20


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--num_nodes', type=int, default=1_000_000)
  p.add_argument('--batches', type=int, default=60, help='batches per trainer before measuring')
  p.add_argument('--cache_ratio', type=float, default=0.25)
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_cache_memory', args)
  plain, cached = partition(args.num_nodes), partition(args.num_nodes, args.cache_ratio)
  caches = cache_mb(cached)
  rows = []
  for share, where in ((False, 'on RPC'), (True, 'mapped in place')):
    without = job_memory(plain, args.batches, share)
    with_cache = job_memory(cached, args.batches, share)
    all_with, all_without = sum(with_cache.values()), sum(without.values())
    rows.append([
      f'other partition {where}', without['rest'], with_cache['rest'], caches,
      with_cache['rest'] / (without['rest'] + caches), without['channel'], with_cache['channel'],
      all_with / (all_without + caches),
    ])  # fmt: skip
  table = Table(
    'cache_memory',
    f'Host memory of 2 trainers x 2 sampling processes, {args.cache_ratio:.0%} cache, '
    f'{args.num_nodes:,} nodes',
    [
      'partitions',
      'no cache, MB',
      'cache, MB',
      'caches, MB',
      'cache vs no cache + caches',
      'channels, no cache, MB',
      'channels, cache, MB',
      'with channels: cache vs no cache + caches',
    ],  # fmt: skip
    rows,
    note=f'PSS of every process of the job after {args.batches} batches per trainer, the '
    'shared-memory channels apart: up to 512 MB per trainer in either job, backed as '
    'batches pass, so how much of them is backed when measured varies from run to run; '
    "the last column counts them too. 'caches': both partitions' cached rows and ids, one "
    'cache per trainer (on RPC each trainer stands for a host).',
  )
  print(results.add(table).render())
  results.write()


if __name__ == '__main__':
  main()
