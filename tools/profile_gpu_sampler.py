"""A window of GPU sampling for a profiler to record (tools/gpu_check.sh profile).

  nsys profile --capture-range=cudaProfilerApi --stats=true \\
    python tools/profile_gpu_sampler.py [--mode CUDA] [--batches 20] [--scale 1.0]
  ncu --profile-from-start off --set full python tools/profile_gpu_sampler.py --batches 1

bench_gpu_sampler.py's workload (the ogbn-products-size power-law graph,
fanout [15, 10, 5], batches of 1024 random seeds) on one GPU: the graph is
built and placed, a few batches warm the sampler up, then ``--batches``
batches run between cudaProfilerStart and cudaProfilerStop, each in an NVTX
range named by its index (a profiler started with the capture range above
records those alone); with ``--launch-ahead`` each batch is launched before
the one before it is read, as a loader on a GPU takes them. With
``--features``, each batch also gathers its nodes' rows of a 100-dim fp32
table held in GPU memory (split 1.0) or read through UVA from pinned host
memory (split 0.0). Prints the window's batches/s and sampled edges/s, as
the profiler slows them.
"""

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'benchmarks'))
from workloads import build_graph, make_seed_batches, sampled_outputs  # noqa: E402

import graphlearn_torch as glt  # noqa: E402
from graphlearn_torch._ext import cuda_kernels_available  # noqa: E402

FANOUT = [15, 10, 5]
WARMUP = 5


def feature_table(num_nodes: int, args) -> glt.data.Feature:
  r"""A 100-dim fp32 table of ``num_nodes`` rows, in GPU memory (``gpu``) or
  read through UVA from pinned host memory (``uva``)."""
  rows = torch.rand(num_nodes, 100, generator=torch.Generator().manual_seed(0))
  split = 1.0 if args.features == 'gpu' else 0.0
  return glt.data.Feature(rows, split_ratio=split, device=args.gpu, with_gpu=True)


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--mode', default='CUDA', choices=['CUDA', 'ZERO_COPY'])
  p.add_argument('--gpu', type=int, default=0)
  p.add_argument('--batches', type=int, default=20, help='batches in the profiled window')
  p.add_argument('--batch_size', type=int, default=1024)
  p.add_argument('--scale', type=float, default=1.0, help='graph size relative to products')
  p.add_argument(
    '--features', default='none', choices=['none', 'gpu', 'uva'], help="gather the batch's rows"
  )
  p.add_argument(
    '--launch-ahead', action='store_true', help='launch each batch before the one before is read'
  )
  args = p.parse_args()
  if not cuda_kernels_available():
    sys.exit('needs a GPU and a build with the CUDA kernels')
  ds, num_edges, _, _ = build_graph(args.scale, 0)
  graph = glt.data.Graph(ds.graph.topo, args.mode, device=args.gpu)
  graph.lazy_init()
  sampler = glt.sampler.NeighborSampler(
    graph, FANOUT, device=torch.device('cuda', args.gpu), edge_dir='in', seed=0
  )
  seeds = make_seed_batches(ds.num_nodes(), 8, args.batch_size, 0)
  inputs = [glt.sampler.NodeSamplerInput(s) for s in seeds]
  feature = feature_table(ds.num_nodes(), args) if args.features != 'none' else None

  def outputs(count: int):
    return sampled_outputs(sampler, lambda i: inputs[i % len(inputs)], 0, count, args.launch_ahead)

  def batch(out) -> int:
    if feature is not None:
      feature[out.node]
    return out.row.numel()

  for out in outputs(WARMUP):
    batch(out)
  torch.cuda.synchronize()
  edges = 0
  torch.cuda.profiler.start()
  started = time.perf_counter()
  timed = outputs(args.batches)
  for i in range(args.batches):
    with torch.cuda.nvtx.range(f'batch {i}'):
      edges += batch(next(timed))
  torch.cuda.synchronize()
  seconds = time.perf_counter() - started
  torch.cuda.profiler.stop()
  print(
    f"'{args.mode}', {num_edges:,} edges: {args.batches / seconds:.1f} batches/s, "
    f'{edges / seconds / 1e6:.1f} M sampled edges/s in the profiled window'
  )


if __name__ == '__main__':
  main()
