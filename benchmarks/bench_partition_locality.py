"""What a lower cut buys: the share of each batch read from other partitions,
and worker mode's batches/s over RPC, on random and streaming partitions.

  python benchmarks/bench_partition_locality.py [--workdir .bench/partition_large]
      [--parts 4] [--kinds random streaming] [--batches 10] [--batch_size 256]

Reads the partitions bench_partition_large.py keeps (``out-<kind>-<parts>``
under the workdir). For each, one trainer per partition on this machine,
each with a DistNeighborLoader (1 sampling process of concurrency 4, fanout
[15, 10, 5] along out-edges) over batches of its own training nodes,
features collected; every other partition's rows come over RPC, as between
hosts (GLT_SHARE_HOST_PARTITIONS=0). Per batch, averaged over every
trainer's timed batches: the sampled nodes and the share owned by another
partition, the feature bytes and the share of them read from another
partition (every row here is 128 fp16 values, so the two shares agree); and
the batches/s of all trainers together (each trainer's batches over the
slowest one's seconds). The edge cut is recomputed here from the partition
book and the input edges.
"""

import argparse
import multiprocessing
import os
from typing import List, NamedTuple

import numpy as np
import torch
from peer_protocol import timed
from results import Results, Table, add_results_argument

import graphlearn_torch as glt

SPAWN = multiprocessing.get_context('spawn')
FANOUT = [15, 10, 5]
WARMUP = 3


class BatchCounts(NamedTuple):
  r"""One batch's sampled nodes and feature bytes, and those owned elsewhere."""

  nodes: int
  remote_nodes: int
  feature_bytes: int
  remote_feature_bytes: int


def counts_of(batch, node_pb, rank: int) -> BatchCounts:
  remote = node_pb[batch.node] != rank
  row_bytes = batch.x[0].numel() * batch.x.element_size() if batch.x.numel() else 0
  return BatchCounts(
    batch.node.numel(), int(remote.sum()), batch.x.numel() * batch.x.element_size(),
    int(remote.sum()) * row_bytes,
  )  # fmt: skip


def trainer(rank: int, num_parts: int, root: str, ports, args, results) -> None:
  os.environ['GLT_SHARE_HOST_PARTITIONS'] = '0'  # its sampling process inherits it
  torch.set_num_threads(1)
  dist = glt.distributed
  dist.init_worker_group(num_parts, rank, 'locality')
  options = dist.MpDistSamplingWorkerOptions(
    num_workers=1, worker_concurrency=4, master_addr='127.0.0.1', master_port=ports[0],
    channel_size='1GB', rpc_timeout=600,
  )  # fmt: skip
  ds = dist.DistDataset(edge_dir='out').load(root, rank, graph_mode='CPU', feature_with_gpu=False)
  g = torch.Generator().manual_seed(rank)
  count = (WARMUP + args.batches) * args.batch_size
  seeds = ds.train_idx[torch.randint(0, ds.train_idx.numel(), (count,), generator=g)]
  loader = glt.distributed.DistNeighborLoader(
    ds, FANOUT, seeds, batch_size=args.batch_size, edge_dir='out', collect_features=True,
    worker_options=options,
  )  # fmt: skip
  it, seen = iter(loader), []

  def step() -> int:
    batch = next(it)
    seen.append(counts_of(batch, ds.node_pb, rank))
    return batch.edge_index.size(1)

  try:
    result = timed(step, WARMUP, args.batches)
  finally:
    loader.shutdown()
  results.put((rank, result, seen[WARMUP:]))


def run_partitioning(root: str, num_parts: int, args) -> tuple:
  r"""One trainer per partition of ``root``; returns the batches/s of all
  of them and every timed batch's counts."""
  results = SPAWN.Queue()
  ports = (glt.utils.get_free_port('127.0.0.1'),)
  procs = [
    SPAWN.Process(target=trainer, args=(r, num_parts, root, ports, args, results))
    for r in range(num_parts)
  ]
  for p in procs:
    p.start()
  try:
    reports = [results.get(timeout=args.timeout) for _ in procs]
  finally:
    for p in procs:
      p.join(120)
      if p.is_alive():
        p.kill()
  seconds = max(r[1].seconds for r in reports)
  counts: List[BatchCounts] = [c for r in reports for c in r[2]]
  return sum(r[1].batches for r in reports) / seconds, counts


def cut_of(root: str, workdir: str) -> float:
  r"""The share of the graph's directed edges whose ends lie in different
  partitions, from the partition book and the input edges."""
  node_pb = torch.from_numpy(np.load(os.path.join(root, 'node_pb.npy')))
  rows = np.load(os.path.join(workdir, 'rows.npy'), mmap_mode='r')
  cols = np.load(os.path.join(workdir, 'cols.npy'), mmap_mode='r')
  cut, chunk = 0, 1 << 24
  for s in range(0, rows.shape[0], chunk):
    r = torch.from_numpy(np.array(rows[s : s + chunk], dtype=np.int64))
    c = torch.from_numpy(np.array(cols[s : s + chunk], dtype=np.int64))
    cut += int((node_pb[r] != node_pb[c]).sum())
  return cut / rows.shape[0]


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--workdir', default='.bench/partition_large')
  p.add_argument('--parts', type=int, default=4)
  p.add_argument('--kinds', nargs='+', default=['random', 'streaming'])
  p.add_argument('--batches', type=int, default=10, help='timed batches per trainer')
  p.add_argument('--batch_size', type=int, default=256)
  p.add_argument('--timeout', type=float, default=3600)
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_partition_locality', args)
  rows = []
  for kind in args.kinds:
    root = os.path.join(args.workdir, f'out-{kind}-{args.parts}')
    cut = cut_of(root, args.workdir)
    rate, counts = run_partitioning(root, args.parts, args)
    nodes = sum(c.nodes for c in counts) / len(counts)
    remote = sum(c.remote_nodes for c in counts) / sum(c.nodes for c in counts)
    feature_mb = sum(c.feature_bytes for c in counts) / len(counts) / 1e6
    remote_bytes = sum(c.remote_feature_bytes for c in counts) / sum(
      c.feature_bytes for c in counts
    )
    rows.append([kind, 100 * cut, nodes, 100 * remote, feature_mb, 100 * remote_bytes, rate])
    print(rows[-1], flush=True)
  table = results.add(
    Table(
      'partition_locality',
      f'Reads from other partitions per batch, {args.parts} partitions, worker mode over RPC',
      [
        'partitioner',
        'edge cut, %',
        'nodes per batch',
        'remote nodes, %',
        'feature MB per batch',
        'remote feature bytes, %',
        'batches/s',
      ],
      rows,
      note=f'One trainer per partition on one machine, 1 sampling process each, batches of '
      f'{args.batch_size} training seeds, fanout {FANOUT} along out-edges, features '
      "collected; other partitions' rows over RPC as between hosts. Batches/s: all trainers' "
      "batches over the slowest one's seconds.",
    )  # fmt: skip
  )
  print(table.render())
  results.write()


if __name__ == '__main__':
  main()
