"""DGL 2.1's and GraphBolt's CPU sampling and feature gather, measured as
bench_sampler.py asks.

  DGL_PYTHON/bin/python benchmarks/dgl_peer.py DIR --threads 2 --fanout 15 10 5

Run by bench_sampler.py --dgl-python in a separate environment with DGL 2.1.0
(``make dgl-peer``). DIR holds what bench_sampler.py wrote (see glt_peer.py):
the graph in CSC (destination-major), the seed batches and the node sets to
gather. Prints one JSON line with the figures.

DGL and GraphBolt are set up as their users would for speed on a CPU:
  - DGL: ``dgl.dataloading.NeighborSampler(fanouts).sample_blocks`` on a
    CSC-only graph (its fused sampling path, with more than one thread);
  - GraphBolt: a ``FusedCSCSamplingGraph`` through the ``ItemSampler ->
    sample_neighbor`` datapipe, in the main process;
  - GraphBolt's ``TorchBasedFeature.read`` for the gather.
Both take fanouts in layer order (the hop nearest the seeds last), so
``--fanout 15 10 5`` is given to them as [5, 10, 15]: the same hops. They
sample every frontier node again in each hop (no deduplication across hops),
so their batches hold more edges than ours: compare edges/s first.
``torch.set_num_threads`` bounds their OpenMP threads (they share torch's
libgomp); each sampler's ``cores_busy`` (CPU time over wall time) shows
whether that holds.
"""

import importlib.metadata
import json
import os
import time

import torch
from peer_protocol import load, parse_peer_args


def timed(fn, batches, count) -> dict:
  r"""Batches/s, edges/s and edges per batch of ``count`` calls of ``fn`` over
  ``batches`` in turn, after 3 warm-up calls (``fn`` returns the edges it
  sampled), and the cores the process kept busy meanwhile (its CPU time over
  the wall time: at most the thread count when torch's bound holds)."""
  for b in batches[:3]:
    fn(b)
  edges = 0
  t, cpu = time.perf_counter(), time.process_time()
  for i in range(count):
    edges += fn(batches[i % len(batches)])
  seconds, cpu_seconds = time.perf_counter() - t, time.process_time() - cpu
  return {
    'batches_per_s': count / seconds,
    'edges_per_s': edges / seconds,
    'edges_per_batch': edges / count,
    'cores_busy': cpu_seconds / seconds,
  }


def main():
  args = parse_peer_args(__doc__.split('\n')[0])
  torch.manual_seed(args.seed)
  os.environ.setdefault('DGLBACKEND', 'pytorch')  # DGL's backend, before its import
  import dgl
  import dgl.graphbolt as gb

  dgl.seed(args.seed)
  indptr, indices = load(args.dir, 'indptr').long(), load(args.dir, 'indices').long()
  num_nodes = indptr.numel() - 1
  seeds = list(load(args.dir, 'seeds'))
  layer_fanouts = list(reversed(args.fanout))
  out = {
    'dgl': importlib.metadata.version('dgl'),
    'torch': torch.__version__,
    'threads': args.threads,
  }

  # DGL: a CSC-only graph, so sample_blocks takes the fused path.
  g = dgl.graph(
    ('csc', (indptr, indices, torch.tensor([], dtype=torch.int64))), num_nodes=num_nodes
  )
  g = g.formats('csc')
  sampler = dgl.dataloading.NeighborSampler(layer_fanouts)

  def dgl_batch(s):
    _, _, blocks = sampler.sample_blocks(g, s)
    return sum(b.num_edges() for b in blocks)

  out['dgl_fused'] = timed(dgl_batch, seeds, args.batches)

  # GraphBolt: the ItemSampler -> sample_neighbor datapipe over the same seeds.
  graph = gb.fused_csc_sampling_graph(indptr, indices)
  batch_size = seeds[0].numel()
  order = torch.cat([seeds[i % len(seeds)] for i in range(args.batches + 3)])
  datapipe = gb.ItemSampler(gb.ItemSet(order, names='seed_nodes'), batch_size=batch_size)
  datapipe = datapipe.sample_neighbor(graph, [torch.LongTensor([f]) for f in layer_fanouts])
  loader = iter(gb.DataLoader(datapipe, num_workers=0))

  def graphbolt_batch(_):
    minibatch = next(loader)
    return sum(sg.sampled_csc.indices.numel() for sg in minibatch.sampled_subgraphs)

  out['graphbolt'] = timed(graphbolt_batch, seeds, args.batches)

  ids = load(args.dir, 'gather_ids')
  bounds = load(args.dir, 'gather_offsets').tolist()
  id_batches = [ids[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1)]
  table = torch.randn(num_nodes, args.dim)
  feature = gb.TorchBasedFeature(table)
  feature.read(id_batches[0])
  t = time.perf_counter()
  for _ in range(args.repeat):
    for batch in id_batches:
      feature.read(batch)
  gather_s = time.perf_counter() - t
  assert torch.equal(feature.read(id_batches[0]), table[id_batches[0]])
  out['graphbolt_gather_rows_per_s'] = args.repeat * ids.numel() / gather_s
  print(json.dumps(out))


if __name__ == '__main__':
  main()
