"""Every RPC of bench_dist_sampling.py's worker-mode collocated row, counted.

  python benchmarks/profile_dist_rpc.py [--share 0|1] [--batches 200] [--prefetch 0]
                                        [--cache_ratio 0.0]

Two trainers on the bench's METIS partitions (1M nodes), each with a
collocated DistNeighborLoader; per batch of each trainer: the requests it
sent by callee, their tensor bytes each way and round-trip milliseconds,
and the requests it served with the callee's own milliseconds
(``torch.distributed.rpc.rpc_async`` and the RPC layer's ``_invoke_callee``
are wrapped). ``--share 0`` keeps the other partition on RPC, as between
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


def trainer(rank, root, port, batches, results, share, prefetch=0):
  r"""One trainer: its partition, a collocated loader timed over ``batches``
  batches, and its RPC counts put on ``results``."""
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
  n, edges, secs, *_ = b.time_loader(ds, ds.node_pb, rank, options, batches)
  import graphlearn_torch.distributed.runtime.rpc as grpc

  names = [type(c).__name__ for c in grpc._require_state().callees]
  named = {(k[0], names[k[1]] if isinstance(k[1], int) else k[1]): v for k, v in stats.items()}
  results.put((rank, n, edges, secs, named))
  dist.barrier()
  dist.shutdown_rpc()


def rpc_rows(reports) -> list:
  r"""Per trainer, direction and callee: calls, kB out and back, ms."""
  rows = []
  for rank, n, _, _, stats in reports:
    n = n + b.WARMUP  # the counts cover the warm-up batches too
    for key, (calls, out_b, in_b, s) in sorted(stats.items(), key=str):
      each = s / calls * 1e3 if calls else 0.0
      rows.append([rank, key[0], str(key[1]), calls / n, out_b / n / 1e3, in_b / n / 1e3, each,
                   s / n * 1e3])  # fmt: skip
  return rows


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--share', choices=['0', '1'], default='0', help='GLT_SHARE_HOST_PARTITIONS')
  p.add_argument('--num_nodes', type=int, default=1_000_000)
  p.add_argument('--batches', type=int, default=200, help='timed batches per trainer')
  p.add_argument('--prefetch', type=int, default=0, help="the collocated loader's prefetch_size")
  p.add_argument('--cache_ratio', type=float, default=0.0, help='partitions with a feature cache')
  add_results_argument(p)
  args = p.parse_args()
  out = Results('profile_dist_rpc', args)
  share, batches, prefetch = args.share, args.batches, args.prefetch
  root = b.partition(args.num_nodes, args.cache_ratio)
  results = SPAWN.Queue()
  port = b.free_port()
  procs = [
    SPAWN.Process(target=trainer, args=(r, root, port, batches, results, share, prefetch))
    for r in range(2)
  ]
  for p in procs:
    p.start()
  try:
    reports = sorted(results.get(timeout=1200) for _ in procs)
  finally:
    for p in procs:
      p.join(60)
      if p.is_alive():
        p.kill()
        p.join()
  total = sum(r[1] for r in reports)
  secs = max(r[3] for r in reports)
  table = Table(
    'rpc',
    f'The RPCs of a collocated worker-mode batch (GLT_SHARE_HOST_PARTITIONS={share}, '
    f'prefetch {prefetch}): {total / secs:.2f} batches/s over both trainers',
    [
      'trainer',
      'direction',
      'callee',
      'calls/batch',
      'kB out/batch',
      'kB back/batch',
      'ms each',
      'ms/batch',
    ],  # fmt: skip
    rpc_rows(reports),
  )
  print(out.add(table).render())
  out.write()


if __name__ == '__main__':
  main()
