"""Feature lookup on the GPU beside plain copies of the same bytes.

  python benchmarks/bench_gpu_feature.py [--gpu 0] [--dim 100] [--scale 1.0]

The graph of bench_sampler.py (ogbn-products' size), a random fp32 table of
``--dim`` columns (100: 980 MB), and the node sets of 8 sampled batches
(glt NeighborSampler, fanout [15, 10, 5], 1024 random seeds; ids already on
the GPU, as a GPU loader holds them). Rows, all measured in this run:
  - UVA: ``Feature(table, split_ratio=0.0)``, every row in pinned host
    memory, gathered by the GPU through UVA; beside a pinned host-to-device
    copy of the same bytes;
  - GPU: ``split_ratio=1.0``, the whole table in GPU memory; beside a
    device-to-device copy of the same bytes (target: 50% or more);
  - each of those two again with the gathers' checks (that every id has a
    row) read once a round of the 8 node sets, as a loader reads a batch's
    gathers' checks together, not once a gather as ``feature[ids]`` does;
  - split 0.2: the hottest fifth of the rows by in-degree in GPU memory,
    the rest through UVA, as ``Dataset.init_node_features(...,
    sort_func=sort_by_in_degree, split_ratio=0.2)`` places them; beside the
    pinned host-to-device copy;
  - CPU: ``Feature(table, with_gpu=False)`` on every core, beside
    ``torch.index_select`` on the same ids;
  - with ``--glt-gpu build/glt-gpu/pkg`` (``make glt-gpu-peer``): GLT 0.2.4's
    Feature at splits 0.0, 0.2 (reordered by its sort_by_in_degree) and 1.0
    on the same table and ids, in a process of its own
    (benchmarks/glt_gpu_peer.py), beside the same limits.
GB/s counts the gathered rows' bytes once. A machine without a GPU and the
CUDA kernels prints the CPU row and says why the GPU rows are missing.
"""

import argparse
import os
import sys
from typing import Callable, List, Tuple

import torch
from bench_gpu_sampler import describe_machine
from results import Results, Table, add_results_argument
from workloads import PeerFailed, build_graph, make_seed_batches, rows_per_s, run_peer_script

import graphlearn_torch as glt
from graphlearn_torch.data.gather_checks import GatherChecks

FANOUT = [15, 10, 5]
NUM_BATCHES = 8


def copy_of_rows(src: torch.Tensor, dst: torch.Tensor) -> Callable[[torch.Tensor], None]:
  r"""Copies as many leading rows of ``src`` into ``dst`` as ``ids`` has:
  the bytes a gather of ``ids`` moves, in one contiguous copy."""

  def copy(ids: torch.Tensor) -> None:
    n = ids.numel()
    dst[:n].copy_(src[:n], non_blocking=True)

  return copy


def checks_read_once_a_round(feature, num_sets: int) -> Callable[[torch.Tensor], None]:
  r"""``feature``'s gather of ids as a loader's batch gathers: the check
  that every id has a row left on the GPU (``GatherChecks``) and read once
  every ``num_sets`` gathers, not once a gather as ``feature[ids]`` reads it
  (a host sync that leaves the GPU idle until the next gather starts)."""
  checks, gathered = GatherChecks(), [0]

  def gather(ids: torch.Tensor) -> None:
    feature.rows(ids, checks)
    gathered[0] += 1
    if gathered[0] % num_sets == 0:
      checks.raise_first()

  return gather


def gpu_rows(ds, table, id_sets, args) -> list:
  r"""``(gather, rows/s, peer, peer rows/s)`` of the GPU lookups: UVA
  (split 0.0) beside a pinned host-to-device copy, GPU memory (split 1.0)
  beside a device-to-device copy, each also with its checks read once a
  round of the node sets, the hottest fifth by in-degree in GPU memory
  beside the pinned copy."""
  device = torch.device('cuda', args.gpu)
  sync = torch.cuda.synchronize
  gpu_ids = [ids.to(device) for ids in id_sets]
  most = max(ids.numel() for ids in id_sets)
  pinned = torch.empty(most, args.dim).pin_memory()
  on_gpu = torch.empty(most, args.dim, device=device)
  on_gpu_too = torch.empty(most, args.dim, device=device)
  h2d = rows_per_s(copy_of_rows(pinned, on_gpu), gpu_ids, args.repeat, sync)
  d2d = rows_per_s(copy_of_rows(on_gpu_too, on_gpu), gpu_ids, args.repeat, sync)
  rows = []
  for name, ratio, peer_name, peer in (
    ('UVA gather (split 0.0)', 0.0, 'pinned host-to-device copy', h2d),
    ('GPU gather (split 1.0)', 1.0, 'device-to-device copy', d2d),
  ):
    feature = glt.data.Feature(table, split_ratio=ratio, device=args.gpu)
    assert torch.equal(feature[gpu_ids[0][:1000]].cpu(), table[id_sets[0][:1000]])
    rows.append(
      (name, rows_per_s(feature.__getitem__, gpu_ids, args.repeat, sync), peer_name, peer)
    )
    once_a_round = checks_read_once_a_round(feature, len(gpu_ids))
    rate = rows_per_s(once_a_round, gpu_ids, args.repeat, sync)
    rows.append((f'{name}, checks read once a round', rate, peer_name, peer))
    del feature
  ds.init_node_features(
    table, sort_func=glt.data.sort_by_in_degree, split_ratio=0.2, device=args.gpu
  )
  mixed = ds.node_features
  assert torch.equal(mixed[gpu_ids[0][:1000]].cpu(), table[id_sets[0][:1000]])
  rate = rows_per_s(mixed.__getitem__, gpu_ids, args.repeat, sync)
  rows.append(('mixed gather (split 0.2, by in-degree)', rate, 'pinned host-to-device copy', h2d))
  return rows


def glt_gpu_rows(ds, table, id_sets, ours: list, args) -> Tuple[list, List[str]]:
  r"""GLT's GPU lookups of the same table and ids (glt_gpu_peer.py, a
  process a split, so that one split failing leaves the others), each
  beside the limit ours (its rows ``ours``) is measured against at that
  split: ``([(gather, rows/s, peer, peer rows/s)], [how a split failed])``."""
  limits = {}
  for name, _, peer, peer_rate in ours:
    for ratio in ('0.0', '0.2', '1.0'):
      if f'split {ratio}' in name:
        limits[ratio] = (peer, peer_rate)
  topo = ds.graph.topo
  arrays = {
    'indptr': topo.indptr,
    'indices': topo.indices,
    'gather_ids': torch.cat(id_sets),
    'gather_offsets': torch.tensor([0] + [ids.numel() for ids in id_sets]).cumsum(0),
  }
  options = ['--gpu', str(args.gpu), '--dim', str(args.dim), '--repeat', str(args.repeat)]
  options += ['--table-seed', '0', '--rows', str(table.size(0))]
  rows, failures = [], []
  for ratio in limits:
    try:
      got = run_peer_script(
        'glt_gpu_peer.py', sys.executable, arrays, options + ['--splits', ratio], args.glt_gpu
      )
    except PeerFailed as e:
      last = str(e).strip().splitlines()[-1]
      print(f'GLT gather (split {ratio}) failed: {e}')
      failures.append(f"GLT's gather (split {ratio}) failed here: {last}")
      continue
    for split, rate in got['gather_rows_per_s'].items():
      rows.append((f'GLT {got["glt"]} gather (split {split})', rate, *limits[ratio]))
  return rows, failures


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--gpu', type=int, default=0)
  p.add_argument('--dim', type=int, default=100)
  p.add_argument('--scale', type=float, default=1.0, help='graph size relative to products')
  p.add_argument('--repeat', type=int, default=5, help='timed rounds over the 8 node sets')
  p.add_argument('--seed', type=int, default=0)
  p.add_argument(
    '--glt-gpu', default='', help="GLT's package built with CUDA (make glt-gpu-peer), to run beside"
  )
  add_results_argument(p)
  args = p.parse_args()
  results = Results(f'bench_gpu_feature_dim{args.dim}', args)
  torch.set_num_threads(os.cpu_count() or 1)
  ds, num_edges, _, _ = build_graph(args.scale, args.seed)
  sampler = glt.sampler.NeighborSampler(ds.graph, FANOUT, device='cpu', edge_dir='in', seed=0)
  id_sets = [
    sampler.sample_from_nodes(glt.sampler.NodeSamplerInput(seeds)).node
    for seeds in make_seed_batches(ds.num_nodes(), NUM_BATCHES, 1024, args.seed)
  ]
  table = torch.randn(ds.num_nodes(), args.dim, generator=torch.Generator().manual_seed(0))
  row_bytes = args.dim * table.element_size()
  peer_failures = []
  cpu = glt.data.Feature(table, with_gpu=False)
  rows = [('CPU gather', rows_per_s(cpu.__getitem__, id_sets, args.repeat), 'torch.index_select',
           rows_per_s(lambda ids: table.index_select(0, ids), id_sets, args.repeat))]  # fmt: skip
  if not torch.cuda.is_available():
    print('GPU rows skipped: no GPU (torch.cuda.is_available() is False)')
  elif not glt.data.Feature(table[:1], device=args.gpu).with_gpu:
    print('GPU rows skipped: this build has no CUDA kernels')
  else:
    rows += gpu_rows(ds, table, id_sets, args)
    if args.glt_gpu:
      peer_rows, peer_failures = glt_gpu_rows(ds, table, id_sets, rows, args)
      rows += peer_rows
  out = Table(
    'gpu_gather',
    f'Feature lookup, {args.dim}-dim fp32 rows ({table.nbytes / 1e6:,.0f} MB table), the node '
    f'sets of {NUM_BATCHES} sampled batches',
    ['gather', 'rows/s', 'GB/s', 'limit or peer', 'its GB/s', 'vs it'],
    [
      [name, r, r * row_bytes / 1e9, peer, pr * row_bytes / 1e9, r / pr]
      for name, r, peer, pr in rows
    ],
    chart={'label': 'gather', 'value': 'GB/s'},
    note=f'{describe_machine(args.gpu)}. {args.repeat} timed rounds; GB/s counts the gathered '
    "rows' bytes once. The copies move as many contiguous rows: the device's limit."
    + ''.join(f' {failure}.' for failure in peer_failures),
  )
  print(results.add(out).render())
  results.write()


if __name__ == '__main__':
  main()
