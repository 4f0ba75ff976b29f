"""What bench_sampler.py hands a peer script (glt_peer.py, dgl_peer.py), which
runs in the peer's own environment: a directory of ``.npy`` files (indptr,
indices in CSC, seeds, gather_ids, gather_offsets) and these arguments; and
how every trainer of bench_dist_sampling.py and bench_multihost.py (ours,
glt_dist_peer.py, dgl_dist_peer.py) times its batches and counts its host's
bytes."""

import argparse
import time
from typing import Callable, NamedTuple, Optional, Tuple

import numpy as np
import torch
from profiling import profiled_batches


def parse_peer_args(description: str) -> argparse.Namespace:
  r"""The peer script's arguments (``bench_peer`` in bench_sampler.py passes
  them), with torch's thread count set from ``--threads``."""
  p = argparse.ArgumentParser(description=description)
  p.add_argument('dir')
  p.add_argument('--threads', type=int, default=2)
  p.add_argument('--fanout', type=int, nargs='+', default=[15, 10, 5])
  p.add_argument('--batches', type=int, default=60)
  p.add_argument('--dim', type=int, default=100)
  p.add_argument('--repeat', type=int, default=3)
  p.add_argument('--seed', type=int, default=0)
  args = p.parse_args()
  torch.set_num_threads(args.threads)
  return args


def load(directory: str, name: str) -> torch.Tensor:
  r"""One of the handed-over arrays."""
  return torch.from_numpy(np.load(f'{directory}/{name}.npy'))


def interface_bytes(ifname: Optional[str]) -> Optional[tuple]:
  r"""``(sent, received)`` bytes of this host's interface ``ifname`` so far;
  None for no interface (loopback: both trainers would share one count)."""
  if ifname is None:
    return None
  stats = f'/sys/class/net/{ifname}/statistics'
  return tuple(int(open(f'{stats}/{d}_bytes').read()) for d in ('tx', 'rx'))


def bytes_per_batch(before: Optional[tuple], after: Optional[tuple], batches: int):
  r"""``[sent, received]`` per batch between two ``interface_bytes``."""
  return None if before is None else [(a - b) / batches for a, b in zip(after, before)]


class Timed(NamedTuple):
  r"""A loader's timing: ``batches`` batches (``edges`` sampled edges) in
  ``seconds`` after the warm-up batches, which took ``warmup`` seconds; the
  first batch came at ``first_at`` (``time.time()``, comparable across
  processes)."""

  batches: int
  edges: int
  seconds: float
  warmup: float
  first_at: float

  def rates(self) -> dict:
    r"""Batches/s and sampled edges/s, as a peer's JSON line gives them."""
    return {'batches_per_s': self.batches / self.seconds, 'edges_per_s': self.edges / self.seconds}


def timed(next_batch: Callable[[], int], warmup: int, batches: int) -> Timed:
  r"""Times ``batches`` calls of ``next_batch`` (which takes a loader's next
  batch, its features included, and returns its sampled edges) after
  ``warmup`` (at least 1) untimed ones."""
  start = time.perf_counter()
  next_batch()
  first_at = time.time()
  for _ in range(warmup - 1):
    next_batch()
  warmup_s = time.perf_counter() - start
  edges = 0
  with profiled_batches() as profile:
    start = time.perf_counter()
    for _ in range(batches):
      edges += next_batch()
    seconds = time.perf_counter() - start
    if profile is not None:
      profile['summary'] = f'{batches} batches in {seconds:.3f} s, profiled'
  return Timed(batches, edges, seconds, warmup_s, first_at)


def node_labels(num_nodes: int, seed: int) -> torch.Tensor:
  r"""Random labels of 47 classes (ogbn-products' count) for a loader's
  batches: GLT's loaders need labels."""
  return torch.randint(0, 47, (num_nodes,), generator=torch.Generator().manual_seed(seed))


def time_calls(call: Callable[[int], Tuple[int, int]], batches: int, sync=lambda: None) -> dict:
  r"""``call(i)`` (the i-th batch; it gives the batch's sampled edges and
  nodes) for ``batches`` batches after 3 warm-up ones: ``batches_per_s``,
  ``edges_per_s``, ``nodes_per_batch`` and ``edges_per_batch``; ``sync``
  waits for a device's work (``torch.cuda.synchronize`` on a GPU)."""
  for i in range(3):
    call(i)
  sync()
  edges = nodes = 0
  start = time.perf_counter()
  for i in range(batches):
    batch_edges, batch_nodes = call(i)
    edges += batch_edges
    nodes += batch_nodes
  sync()
  seconds = time.perf_counter() - start
  return {
    'batches_per_s': batches / seconds,
    'edges_per_s': edges / seconds,
    'nodes_per_batch': nodes / batches,
    'edges_per_batch': edges / batches,
  }


def time_loader(loader, batches: int, sync: Callable[[], None] = lambda: None) -> dict:
  r"""``time_calls`` of ``loader``'s batches, its epochs taken in turn."""
  it = iter(loader)

  def next_batch(_) -> Tuple[int, int]:
    nonlocal it
    try:
      batch = next(it)
    except StopIteration:  # the next epoch
      it = iter(loader)
      batch = next(it)
    return batch.edge_index.size(1), batch.num_nodes

  return time_calls(next_batch, batches, sync)
