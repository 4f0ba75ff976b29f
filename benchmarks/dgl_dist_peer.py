"""DGL 2.1's distributed sampling on the graph of bench_dist_sampling.py.

  DGL_PYTHON benchmarks/dgl_dist_peer.py prepare GRAPH OUT
  DGL_PYTHON benchmarks/dgl_dist_peer.py machine OUT --rank R --ip_config FILE
                                        --num_samplers S --batches B --warmup W
                                        [--ifname eth0] --report REPORT

Run by bench_multihost.py --dgl-python in DGL's own environment (make
dgl-peer), so that DGL and graphlearn_torch never share a process.

``prepare`` reads the graph bench_dist_sampling.py samples (GRAPH holds
``src.npy``, ``dst.npy``, ``feat.npy`` and ``label.npy``, written by our
side), builds a ``dgl.graph`` of it and partitions it in 2 with DGL's own
``dgl.distributed.partition_graph`` (METIS, as DGL's examples do) under OUT,
once.

``machine`` is one machine of a DGL job, as DGL's ``tools/launch.py`` starts
it: one ``DistGraphServer`` process holding partition R (``DGL_ROLE=server``)
and one trainer, here in this process, with S sampling processes
(``DGL_NUM_SAMPLER``), OMP_NUM_THREADS=1 everywhere (ours: 1 thread per
trainer). The trainer follows DGL's GraphSAGE example
(examples/distributed/graphsage/node_classification.py): ``initialize``,
``DistGraph``, ``node_split`` of every node (its partition's nodes), a
``DistNodeDataLoader`` with ``NeighborSampler([5, 10, 15])`` (DGL lists the
fanouts from the input layer: seeds draw 15, then 10, then 5, as ours with
[15, 10, 5]) over batches of 1024 seeds drawn at random from its nodes, and
the features and labels of each batch pulled with ``g.ndata[...]``. DGL
keeps its partitions in shared memory under fixed names, so each machine
needs a /dev/shm of its own: the caller runs this in a mount namespace with
a private /dev/shm.

Writes one JSON report to REPORT: batches, sampled edges, seconds and
warm-up seconds of the timed batches, and the bytes the machine's interface
``--ifname`` sent and received per batch over all the batches (warm-up
included, as bench_multihost.py counts ours).
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch
from peer_protocol import bytes_per_batch, interface_bytes, timed

GRAPH_NAME = 'bench'
FANOUT = [5, 10, 15]  # DGL's order: input layer first (seeds draw 15)
BATCH = 1024
SERVER_EXIT_S = 120.0  # the longest the machine waits for its server to exit


def prepare(graph: str, out: str) -> str:
  r"""DGL's 2 METIS partitions of the graph under ``graph``, written once
  under ``out``; returns the partition config's path."""
  import dgl

  config = os.path.join(out, f'{GRAPH_NAME}.json')
  if os.path.exists(config):
    return config
  src, dst, feat, label = (np.load(os.path.join(graph, f'{n}.npy')) for n in (
    'src', 'dst', 'feat', 'label'))  # fmt: skip
  g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=feat.shape[0])
  g.ndata['feat'] = torch.from_numpy(feat)
  g.ndata['label'] = torch.from_numpy(label)
  dgl.distributed.partition_graph(g, GRAPH_NAME, 2, out, part_method='metis')
  return config


def job_env(args) -> dict:
  r"""The variables DGL's launch.py gives every process of the job."""
  return dict(
    DGL_NUM_SAMPLER=str(args.num_samplers),
    DGL_NUM_CLIENT=str(2 * (1 + args.num_samplers)),  # trainers and samplers, both machines
    DGL_CONF_PATH=os.path.join(args.out_dir, f'{GRAPH_NAME}.json'),
    DGL_IP_CONFIG=args.ip_config,
    DGL_NUM_SERVER='1',
    DGL_GRAPH_FORMAT='csc',
    OMP_NUM_THREADS='1',
  )


def start_server(args) -> subprocess.Popen:
  r"""This machine's DistGraphServer, holding partition ``args.rank``."""
  env = dict(os.environ, **job_env(args), DGL_ROLE='server', DGL_SERVER_ID=str(args.rank))
  code = 'import dgl, sys; dgl.distributed.initialize(sys.argv[1])'
  return subprocess.Popen([sys.executable, '-c', code, args.ip_config], env=env)


def train(args) -> dict:
  r"""The trainer: times its loader and returns the report."""
  os.environ.update(job_env(args), DGL_DIST_MODE='distributed', DGL_ROLE='client')
  os.environ['DGL_GROUP_ID'] = '0'
  torch.set_num_threads(1)
  import dgl

  dgl.distributed.initialize(args.ip_config)
  g = dgl.distributed.DistGraph(GRAPH_NAME, part_config=os.environ['DGL_CONF_PATH'])
  everyone = torch.ones(g.num_nodes(), dtype=torch.bool)
  owned = dgl.distributed.node_split(everyone, g.get_partition_book(), force_even=True)
  draws = torch.Generator().manual_seed(args.rank)
  count = (args.warmup + args.batches) * BATCH
  seeds = owned[torch.randint(0, owned.numel(), (count,), generator=draws)]
  sampler = dgl.dataloading.NeighborSampler(FANOUT)
  loader = dgl.dataloading.DistNodeDataLoader(
    g, seeds, sampler, batch_size=BATCH, shuffle=False, drop_last=False
  )
  feat, label = g.ndata['feat'], g.ndata['label']
  it = iter(loader)

  def next_batch() -> int:
    input_nodes, output_nodes, blocks = next(it)
    x, y = feat[input_nodes], label[output_nodes]
    if x.size(0) != input_nodes.numel() or y.size(0) != output_nodes.numel():
      raise RuntimeError('DGL returned features or labels of the wrong size')
    return sum(block.num_edges() for block in blocks)

  before = interface_bytes(args.ifname)
  r = timed(next_batch, args.warmup, args.batches)
  after = interface_bytes(args.ifname)
  return dict(
    dgl_version=dgl.__version__, batches=r.batches, edges=r.edges, seconds=r.seconds,
    warmup=r.warmup, first_at=r.first_at,
    bytes=bytes_per_batch(before, after, args.warmup + args.batches),
  )  # fmt: skip


def machine(args) -> None:
  r"""One machine of the job: its server, and its trainer in this process."""
  server = start_server(args)
  try:
    report = train(args)
    import dgl

    # DGL's own end of a client: a barrier of every client, then the
    # servers are told to exit
    dgl.distributed.exit_client()
    server.wait(timeout=SERVER_EXIT_S)
  finally:
    if server.poll() is None:
      server.kill()
      server.wait()
  if server.returncode != 0:
    raise RuntimeError(f'the DGL server exited with {server.returncode}')
  with open(args.report, 'w') as f:
    json.dump(report, f)


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  sub = p.add_subparsers(dest='role', required=True)
  pre = sub.add_parser('prepare', help="DGL's partitions of the graph")
  pre.add_argument('graph')
  pre.add_argument('out_dir')
  m = sub.add_parser('machine', help='one machine: its server and its trainer')
  m.add_argument('out_dir')
  options = (('rank', int), ('ip_config', str), ('num_samplers', int), ('batches', int),
             ('warmup', int), ('report', str))  # fmt: skip
  for name, kind in options:
    m.add_argument(f'--{name}', type=kind, required=True)
  m.add_argument('--ifname', default=None, help='the interface whose bytes count (none on lo)')
  args = p.parse_args()
  if args.role == 'prepare':
    prepare(args.graph, args.out_dir)
  else:
    machine(args)


if __name__ == '__main__':
  main()
