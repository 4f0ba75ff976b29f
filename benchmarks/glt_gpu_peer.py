"""GLT 0.2.4's CUDA sampler and GPU feature lookup, measured as bench_gpu_sampler.py
and bench_gpu_feature.py ask.

  PYTHONPATH=build/glt-gpu/pkg python benchmarks/glt_gpu_peer.py DIR --gpu 0

Run by those benchmarks with ``--glt-gpu build/glt-gpu/pkg`` (GLT's package,
built with its CUDA kernels by ``make glt-gpu-peer``), in a process of its own:
GLT imports as ``graphlearn_torch``, like ours. DIR holds (numpy .npy files):
  - indptr.npy, indices.npy: the graph in CSC (destination-major), as ours
    holds it;
  - seeds.npy: the [batches, batch_size] seed batches ours sampled (sampling);
  - gather_ids.npy, gather_offsets.npy: the node sets to gather rows for
    (lookup; absent: no lookup rows).
The feature table is ``torch.randn(nodes, dim)`` from generator seed
``--table-seed``: the table the benchmark gathers from, made again here.
Prints one JSON line with the figures.

GLT is configured as its users would for speed on a GPU:
``Graph(topo, mode, device)`` in 'CUDA' and 'ZERO_COPY' modes with
``NeighborSampler(..., device=cuda, seed=...)``, batches timed from the first
hop's launch to the last one's end (``torch.cuda.synchronize``); and
``Feature(table, split_ratio=r, device_group_list=[DeviceGroup(0, [gpu])],
device=gpu)`` for r in 0.0 and 1.0, and for 0.2 the table reordered by
``sort_by_in_degree`` (its ``id2index`` given), as GLT's Dataset places a
hot fifth; ids on the GPU. With ``--loader``, GLT's
``NeighborLoader(Dataset.init_graph(..., graph_mode='CUDA'), ...,
device=cuda)`` over the seed batches in order, the table in GPU memory
(``init_node_features(table, split_ratio=1.0, ...)``) and random labels:
GLT's loader needs both.
"""

import argparse
import json
import os
import time

import torch
from glt_peer import import_glt, library_version, time_sampling
from peer_protocol import load, node_labels, time_loader


def parse_args() -> argparse.Namespace:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('dir')
  p.add_argument('--gpu', type=int, default=0)
  p.add_argument('--fanout', type=int, nargs='+', default=[15, 10, 5])
  p.add_argument('--batches', type=int, default=100)
  p.add_argument('--dim', type=int, default=100)
  p.add_argument('--repeat', type=int, default=5)
  p.add_argument('--table-seed', type=int, default=0)
  p.add_argument('--rows', type=int, default=0, help="the table's rows (default: the nodes)")
  p.add_argument('--loader', action='store_true', help="GLT's NeighborLoader too (see above)")
  p.add_argument('--splits', type=float, nargs='+', default=[0.0, 0.2, 1.0], help='split ratios')
  p.add_argument('--seed', type=int, default=0)
  return p.parse_args()


def sampling(glt, topo, seeds: torch.Tensor, args) -> dict:
  r"""``{mode: time_sampling figures}`` of GLT's
  CUDA sampler in 'CUDA' and 'ZERO_COPY' modes."""
  device = torch.device('cuda', args.gpu)
  out = {}
  for mode in ('CUDA', 'ZERO_COPY'):
    graph = glt.data.Graph(topo, mode=mode, device=args.gpu)
    sampler = glt.sampler.NeighborSampler(
      graph, args.fanout, device=device, edge_dir='in', seed=args.seed
    )
    # the seeds on the CPU: the sampler moves them, as ours does
    out[mode] = time_sampling(glt, sampler, list(seeds), args.batches, torch.cuda.synchronize)
    del sampler, graph
  return out


def loading(glt, csc: tuple, seeds: torch.Tensor, args) -> dict:
  r"""``time_loader`` figures of GLT's NeighborLoader on the GPU over a
  'CUDA' graph (``csc``: its indices and indptr), the table's rows in GPU
  memory (split 1.0) and labels, the seed batches in order
  (``shuffle=False``)."""
  ds = glt.data.Dataset(edge_dir='in')
  num_nodes = csc[1].numel() - 1
  ds.init_graph(csc, layout='CSC', graph_mode='CUDA', device=args.gpu)
  generator = torch.Generator().manual_seed(args.table_seed)
  table = torch.randn(num_nodes, args.dim, generator=generator)
  ds.init_node_features(
    table, split_ratio=1.0, device_group_list=[glt.data.DeviceGroup(0, [args.gpu])],
    device=args.gpu,
  )  # fmt: skip
  ds.init_node_labels(node_labels(num_nodes, args.table_seed))
  loader = glt.loader.NeighborLoader(
    ds, args.fanout, input_nodes=seeds.reshape(-1), batch_size=seeds.size(1), shuffle=False,
    device=torch.device('cuda', args.gpu),
  )  # fmt: skip
  return time_loader(loader, args.batches, torch.cuda.synchronize)


def lookups(glt, topo, table: torch.Tensor, id_sets, args) -> dict:
  r"""``{split ratio: rows/s}`` of GLT's Feature on the GPU."""
  device = torch.device('cuda', args.gpu)
  gpu_ids = [ids.to(device) for ids in id_sets]
  group = [glt.data.DeviceGroup(0, [args.gpu])]
  out = {}
  for ratio in args.splits:
    if 0.0 < ratio < 1.0:  # the hottest fifth first, as GLT's Dataset places it
      rows, id2index = glt.data.sort_by_in_degree(table, ratio, topo)
    else:
      rows, id2index = table, None
    feature = glt.data.Feature(
      rows, id2index, split_ratio=ratio, device_group_list=group, device=args.gpu
    )
    check = gpu_ids[0][:1000]
    assert torch.equal(feature[check].cpu(), table[check.cpu()]), f'split {ratio}: wrong rows'
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.repeat):
      for ids in gpu_ids:
        feature[ids]
    torch.cuda.synchronize()
    out[str(ratio)] = (
      args.repeat * sum(ids.numel() for ids in gpu_ids) / (time.perf_counter() - start)
    )
    del feature
  return out


def main():
  args = parse_args()
  glt = import_glt()
  csc = (load(args.dir, 'indices').long(), load(args.dir, 'indptr').long())
  topo = glt.data.Topology(csc, input_layout='CSC', layout='CSC')
  figures = {'glt': library_version(glt), 'torch': torch.__version__}
  if os.path.exists(f'{args.dir}/seeds.npy'):
    seeds = load(args.dir, 'seeds')
    figures['sampling'] = sampling(glt, topo, seeds, args)
    if args.loader:
      figures['loading'] = loading(glt, csc, seeds, args)
  if os.path.exists(f'{args.dir}/gather_ids.npy'):
    ids = load(args.dir, 'gather_ids')
    bounds = load(args.dir, 'gather_offsets').tolist()
    id_sets = [ids[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1)]
    generator = torch.Generator().manual_seed(args.table_seed)
    table = torch.randn(args.rows or topo.indptr.numel() - 1, args.dim, generator=generator)
    figures['gather_rows_per_s'] = lookups(glt, topo, table, id_sets, args)
  print(json.dumps(figures))


if __name__ == '__main__':
  main()
