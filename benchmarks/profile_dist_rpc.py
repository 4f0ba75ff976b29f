"""Every RPC of bench_dist_sampling.py's worker-mode collocated row, counted.

  python benchmarks/profile_dist_rpc.py [--share 0|1] [--batches 200] [--prefetch 0]
                                        [--cache_ratio 0.0 0.25]

Two trainers on the bench's METIS partitions (1M nodes), each with a
collocated DistNeighborLoader, once per ``--cache_ratio`` (partitions whose
feature tables cache that share of the other partition's hottest rows);
per batch of each trainer: the requests it sent by callee, their tensor
bytes each way and round-trip milliseconds, and the requests it served with
the callee's own milliseconds (``torch.distributed.rpc.rpc_async`` and the
RPC layer's ``_invoke_callee`` are wrapped). A second table gives, per
cache ratio, the share of a batch's nodes owned by the other partition,
the share whose feature rows still come over RPC, and all RPC bytes per
batch. ``--share 0`` keeps the other partition on RPC, as between
hosts (docs/distributed.md, "Speed between machines"); run it under ``perf
record -a`` for where the CPU goes.
"""

import argparse
import multiprocessing
import os
import time

import bench_dist_sampling as b
import torch
from results import Results, Table, add_results_argument

import graphlearn_torch as glt

SPAWN = multiprocessing.get_context('spawn')


def tensor_bytes(x) -> int:
  r"""The bytes of the tensors in ``x`` (nested tuples, lists, dicts, objects)."""
  if isinstance(x, torch.Tensor):
    return x.numel() * x.element_size()
  if isinstance(x, (list, tuple)):
    return sum(tensor_bytes(v) for v in x)
  if isinstance(x, dict):
    return sum(tensor_bytes(v) for v in x.values())
  if hasattr(x, '__dict__'):
    return sum(tensor_bytes(v) for v in vars(x).values())
  return 0


def instrument(stats: dict) -> None:
  r"""Counts this process's RPCs into ``stats``: ``('req', callee)`` for
  those it sends (count, bytes sent, bytes back, round-trip seconds) and
  ``('serve', callee id)`` for those it serves (count, callee seconds). It
  wraps the RPC layer's private ``_invoke_callee``: a profiling tool's
  reach, which the library itself never makes."""
  from torch.distributed import rpc as trpc

  import graphlearn_torch.distributed.runtime.rpc as grpc

  orig_async = trpc.rpc_async
  orig_invoke = grpc._invoke_callee

  def counted(to, func, args=(), kwargs=None, timeout=-1.0):
    key = ('req', args[0] if func is grpc._invoke_callee else getattr(func, '__name__', '?'))
    s = stats.setdefault(key, [0, 0, 0, 0.0])
    s[0] += 1
    s[1] += tensor_bytes(args)
    t0 = time.perf_counter()
    fut = orig_async(to, func, args=args, kwargs=kwargs or {}, timeout=timeout)

    def done(f):
      v = f.value()
      s[2] += tensor_bytes(v)
      s[3] += time.perf_counter() - t0
      return v

    return fut.then(done)

  def invoke(callee_id, *args, **kwargs):
    t0 = time.perf_counter()
    try:
      return orig_invoke(callee_id, *args, **kwargs)
    finally:
      s = stats.setdefault(('serve', callee_id), [0, 0, 0, 0.0])
      s[0] += 1
      s[3] += time.perf_counter() - t0

  invoke.__module__, invoke.__qualname__ = orig_invoke.__module__, orig_invoke.__qualname__
  trpc.rpc_async = counted
  grpc._invoke_callee = invoke


class RemoteShare:
  r"""Counts a trainer's batches' nodes: all, those another partition owns
  (``node_pb``) and those whose feature rows another partition holds
  (``feat_pb``: the owned ones less the cached)."""

  def __init__(self, rank: int, node_pb, feat_pb):
    self.rank, self.node_pb, self.feat_pb = rank, node_pb, feat_pb
    self.batches = self.nodes = self.owned_elsewhere = self.fetched = 0

  def __call__(self, batch) -> None:
    self.batches += 1
    self.nodes += batch.node.numel()
    self.owned_elsewhere += int((self.node_pb[batch.node] != self.rank).sum())
    self.fetched += int((self.feat_pb[batch.node] != self.rank).sum())


def trainer(rank, root, port, batches, results, share, prefetch=0):
  r"""One trainer: its partition, a collocated loader timed over ``batches``
  batches, and its RPC counts and remote shares put on ``results``."""
  os.environ['GLT_SHARE_HOST_PARTITIONS'] = share
  torch.set_num_threads(1)
  dist = glt.distributed
  dist.init_worker_group(2, rank, 'bench')
  stats = {}
  instrument(stats)
  dist.init_rpc('127.0.0.1', port, num_rpc_threads=4)
  ds = dist.DistDataset(edge_dir='in').load(root, rank, graph_mode='CPU', feature_with_gpu=False)
  for key in list(stats):
    stats[key] = [0, 0, 0, 0.0]  # start-up requests are not the batches'
  options = dist.CollocatedDistSamplingWorkerOptions(prefetch_size=prefetch) if prefetch else None
  counts = RemoteShare(rank, ds.node_pb, ds.node_feat_pb)
  n, edges, secs, *_ = b.time_loader(ds, ds.node_pb, rank, options, batches, on_batch=counts)
  import graphlearn_torch.distributed.runtime.rpc as grpc

  names = [type(c).__name__ for c in grpc._require_state().callees]
  named = {(k[0], names[k[1]] if isinstance(k[1], int) else k[1]): v for k, v in stats.items()}
  shares = (counts.nodes / counts.batches, counts.owned_elsewhere / counts.nodes,
            counts.fetched / counts.nodes)  # fmt: skip
  results.put((rank, n, edges, secs, named, shares))
  dist.barrier()
  dist.shutdown_rpc()


def rpc_rows(reports) -> list:
  r"""Per trainer, direction and callee: calls, kB out and back, ms."""
  rows = []
  for rank, n, _, _, stats, _ in reports:
    n = n + b.WARMUP  # the counts cover the warm-up batches too
    for key, (calls, out_b, in_b, s) in sorted(stats.items(), key=str):
      each = s / calls * 1e3 if calls else 0.0
      rows.append([rank, key[0], str(key[1]), calls / n, out_b / n / 1e3, in_b / n / 1e3, each,
                   s / n * 1e3])  # fmt: skip
  return rows


def profile(args, cache_ratio: float) -> list:
  r"""Both trainers' reports, sorted by rank, on the partitions with
  ``cache_ratio``."""
  root = b.partition(args.num_nodes, cache_ratio)
  results = SPAWN.Queue()
  port = b.free_port()
  procs = [
    SPAWN.Process(
      target=trainer, args=(r, root, port, args.batches, results, args.share, args.prefetch)
    )
    for r in range(2)
  ]
  for p in procs:
    p.start()
  try:
    return sorted(results.get(timeout=1200) for _ in procs)
  finally:
    for p in procs:
      p.join(60)
      if p.is_alive():
        p.kill()
        p.join()


def rate(reports) -> float:
  r"""Both trainers' batches over the slower one's seconds."""
  return sum(r[1] for r in reports) / max(r[3] for r in reports)


def rpc_table(args, by_ratio: dict) -> Table:
  rows = [[ratio, *row] for ratio, reports in by_ratio.items() for row in rpc_rows(reports)]
  speeds = ', '.join(f'{rate(r):.2f} with cache ratio {c:g}' for c, r in by_ratio.items())
  return Table(
    'rpc',
    f'The RPCs of a collocated worker-mode batch (GLT_SHARE_HOST_PARTITIONS={args.share}, '
    f'prefetch {args.prefetch})',
    [
      'cache ratio',
      'trainer',
      'direction',
      'callee',
      'calls/batch',
      'kB out/batch',
      'kB back/batch',
      'ms each',
      'ms/batch',
    ],  # fmt: skip
    rows,
    note=f'Batches/s over both trainers: {speeds}.',
  )


def remote_table(args, by_ratio: dict) -> Table:
  r"""Per cache ratio: the remote share of a batch's nodes and the RPC bytes
  per batch, both trainers together."""
  rows = []
  for ratio, reports in by_ratio.items():
    nodes = sum(r[5][0] for r in reports) / len(reports)
    owned = sum(r[5][0] * r[5][1] for r in reports) / len(reports)
    fetched = sum(r[5][0] * r[5][2] for r in reports) / len(reports)
    sent = back = 0.0
    for _, n, _, _, stats, _ in reports:
      for (direction, _), (_, out_b, in_b, _) in stats.items():
        if direction == 'req':
          sent += out_b / (n + b.WARMUP) / len(reports)
          back += in_b / (n + b.WARMUP) / len(reports)
    rows.append([ratio, nodes, 100 * owned / nodes, 100 * fetched / nodes, sent / 1e3, back / 1e3,
                 rate(reports)])  # fmt: skip
  return Table(
    'remote_share',
    f"A batch's remote rows and RPC bytes by cache ratio, {args.num_nodes:,} nodes, "
    '2 METIS partitions',
    [
      'cache ratio',
      'nodes/batch',
      'owned by the other partition, %',
      'rows fetched over RPC, %',
      'kB sent/batch',
      'kB received/batch',
      'batches/s',
    ],  # fmt: skip
    rows,
    note="Per trainer's batch, the two trainers' mean; the other partition on RPC "
    f'(GLT_SHARE_HOST_PARTITIONS={args.share}), as between hosts. Rows fetched over RPC: the '
    "batch's nodes whose feature rows neither this partition nor its cache holds. Bytes: "
    'the tensors of every RPC the trainer sent, sampling and features, each way.',
  )


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--share', choices=['0', '1'], default='0', help='GLT_SHARE_HOST_PARTITIONS')
  p.add_argument('--num_nodes', type=int, default=1_000_000)
  p.add_argument('--batches', type=int, default=200, help='timed batches per trainer')
  p.add_argument('--prefetch', type=int, default=0, help="the collocated loader's prefetch_size")
  p.add_argument(
    '--cache_ratio', type=float, nargs='+', default=[0.0, 0.25],
    help='partitions with a feature cache of this share of rows, a profile each',
  )  # fmt: skip
  add_results_argument(p)
  args = p.parse_args()
  out = Results('profile_dist_rpc', args)
  by_ratio = {ratio: profile(args, ratio) for ratio in args.cache_ratio}
  print(out.add(rpc_table(args, by_ratio)).render())
  print(out.add(remote_table(args, by_ratio)).render())
  out.write()


if __name__ == '__main__':
  main()
