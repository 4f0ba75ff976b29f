"""PyG's own CPU sampler (``torch_geometric.sampler.NeighborSampler`` on
pyg-lib), measured as bench_sampler.py asks.

  PYG_PYTHON benchmarks/pyg_peer.py DIR --threads 2 --fanout 15 10 5 --seed 0

Run by bench_sampler.py --pyg-python in an environment of its own
(``make pyg-peer``: torch, torch_geometric, and pyg-lib built from
../shared/peers), so PyG's sampler never meets ours in a process. DIR holds
the graph in CSC (indptr.npy, indices.npy) and the seed batches (seeds.npy),
as peer_protocol.py says. Prints one JSON line with the figures.

PyG is configured as its users would for speed: a ``Data`` of the graph,
``NeighborSampler(data, num_neighbors)`` (PyG converts the graph to CSC
once, at construction, which is not timed) and its ``sample_from_nodes``,
the call PyG's ``NodeLoader`` makes for every batch, with pyg-lib's
``neighbor_sample`` underneath (PyG's fastest CPU path).
"""

import importlib.metadata
import json
from typing import Tuple

import torch
from peer_protocol import load, parse_peer_args, time_calls


def load_edge_index(directory: str) -> Tuple[torch.Tensor, int]:
  r"""``(edge_index, num_nodes)`` of the graph handed over in ``directory``
  (CSC: column j's rows are indices[indptr[j]:indptr[j + 1]], edges row ->
  j), once pyg-lib is known to import."""
  import torch_geometric

  if not torch_geometric.typing.WITH_PYG_LIB:
    raise SystemExit('pyg-lib does not import in this environment: run make pyg-peer')
  indptr, indices = load(directory, 'indptr').long(), load(directory, 'indices').long()
  num_nodes = indptr.numel() - 1
  col = torch.repeat_interleave(torch.arange(num_nodes), indptr.diff())
  return torch.stack([indices, col]), num_nodes


def versions(threads: int) -> dict:
  r"""The versions measured and the thread count, for the JSON line."""
  import torch_geometric

  return {
    'pyg': torch_geometric.__version__,
    'pyg_lib': importlib.metadata.version('pyg_lib'),
    'torch': torch.__version__,
    'threads': threads,
  }


def rates(sampler, seeds, seed_times, batches: int) -> dict:
  r"""``sampler``'s batches/s, edges/s, nodes and edges per batch over
  ``batches`` batches of ``seeds`` (with ``seed_times``, one tensor per
  batch, or None) after 3 untimed ones, through ``sample_from_nodes``
  (``time_calls``)."""
  from torch_geometric.sampler import NodeSamplerInput

  def sample(i):
    time_of = None if seed_times is None else seed_times[i % len(seeds)]
    node = seeds[i % len(seeds)]
    out = sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=node, time=time_of))
    return out.row.numel(), out.node.numel()

  return time_calls(sample, batches)


def main():
  args = parse_peer_args(__doc__.split('\n')[0])
  from torch_geometric.data import Data
  from torch_geometric.sampler import NeighborSampler

  edge_index, num_nodes = load_edge_index(args.dir)
  sampler = NeighborSampler(Data(edge_index=edge_index, num_nodes=num_nodes), args.fanout)
  got = rates(sampler, load(args.dir, 'seeds'), None, args.batches)
  print(json.dumps({**versions(args.threads), **got}))


if __name__ == '__main__':
  main()
