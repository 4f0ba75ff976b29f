"""GLT 0.2.4's worker and server-client modes on bench_dist_sampling.py's partitions.

  GLT_PYTHON/bin/python benchmarks/glt_dist_peer.py ROOT SEEDS --mode collocated|mp|server-client
                                    [--num_workers 1] [--batches 100] [--warmup 20]
  GLT_PYTHON/bin/python benchmarks/glt_dist_peer.py ROOT SEEDS --prepare
  GLT_PYTHON/bin/python benchmarks/glt_dist_peer.py ROOT SEEDS --mode mp --rank R
                                    --master ADDR --port P --out FILE [...]

Run by bench_dist_sampling.py --glt-python in a separate environment that has
GraphLearn-for-PyTorch (import name ``graphlearn_torch``, like ours)
installed, so the two libraries never share a process. ROOT is one of
bench_dist_sampling.py's partition directories (ours, written by our
MetisPartitioner); the first run writes the same partitions in GLT's own
format under ROOT/glt with GLT's own save functions (``save_meta``,
``save_node_pb``, ``save_graph_partition``, ``save_feature_partition``, and the
labels as ``whole_node_label_file``; each partition's edges in CSC, which
GLT's loader reads with ``input_layout='CSC'``, where its COO path needs
torch-sparse, which has no wheel here), so both libraries sample the same
partitions. SEEDS holds ``seeds<rank>.npy``, each trainer's seeds (WARMUP +
batches batches of 1024, the seeds ours gets).

Two trainer processes on this machine, one per partition, as in ours: each
loads its partition with ``DistDataset(edge_dir='in').load(ROOT/glt, rank,
graph_mode='CPU', input_layout='CSC', feature_with_gpu=False)`` and iterates a
``DistNeighborLoader`` (fanout [15, 10, 5], batch 1024, features and labels
collected) with ``CollocatedDistSamplingWorkerOptions`` (4 RPC threads, as
ours) or ``MpDistSamplingWorkerOptions(num_workers=N, worker_concurrency=4,
channel_size='512MB')``, as ours, and ``random_seed=0`` (without a seed
GLT's CPU kernel reads std::random_device once per seed node). GLT has no in-place reading of a host
peer's partition: every remote hop and feature row goes over RPC.
Prints one JSON line: batches, sampled edges, the slowest trainer's seconds
and warm-up seconds (both trainers' batches over the slowest one's time),
and the seconds from starting the trainers to the later first batch.

In 'server-client' mode (bench_server_client.py --glt-python), as GLT's
server_client_mode example: 2 servers, one partition each, loaded as above,
each with ``num_workers`` sampling processes, and 2 clients; client i samples
on server i (``RemoteDistSamplingWorkerOptions(server_rank=i,
worker_concurrency=4, buffer_size='512MB', prefetch_size=4)``), which reads
the client's seeds from ``seeds<i>.pt``. The report is the clients'.

Across hosts (bench_multihost.py --glt-python), each host runs one trainer:
``--prepare`` writes GLT's partitions first, then ``--rank R`` runs trainer R
in this process against the master at ``--master``/``--port`` (its RPC on P
and P + 1, the trainers' meeting point on P + 2) and writes its report, the
same fields for this trainer alone and the bytes the host's interface
``--ifname`` sent and received per batch, to ``--out``.
"""

import argparse
import datetime
import importlib.metadata
import json
import multiprocessing
import os
import pickle
import queue
import time
import warnings

import numpy as np
import torch
from glt_peer import import_glt
from peer_protocol import bytes_per_batch, interface_bytes, timed
from processes import all_reports

# At import, so that the processes GLT spawns, which import this script
# first, get the stand-in for torch-sparse before they import GLT.
glt = import_glt()
FANOUT = [15, 10, 5]
BATCH = 1024
SPAWN = multiprocessing.get_context('spawn')
BARRIER_S = 600.0  # the longest a trainer waits for the others to finish


def npy(path: str) -> torch.Tensor:
  return torch.from_numpy(np.load(path))


def write_glt_partitions(root: str) -> str:
  r"""ROOT's partitions (our format, homogeneous) in GLT's format, written
  once under ROOT/glt with GLT's own functions; returns that directory."""
  out = os.path.join(root, 'glt')
  done = os.path.join(out, 'WRITTEN')
  if os.path.exists(done):
    return out
  part = glt.partition
  with open(os.path.join(root, 'META.json')) as f:
    meta = json.load(f)
  if meta['data_cls'] != 'homo':
    raise ValueError(f'{root}: only homogeneous partitions are converted')
  num_parts = int(meta['num_parts'])
  num_nodes = int(sum(meta['num_nodes'].values()))
  os.makedirs(out, exist_ok=True)
  part.save_meta(out, num_parts, 'homo')
  part.save_node_pb(out, npy(os.path.join(root, 'node_pb.npy')))
  part.save_edge_pb(out, npy(os.path.join(root, 'edge_pb.npy')))
  for p in range(num_parts):
    graph = os.path.join(root, f'part{p}', 'graph')
    rows, cols, eids = (npy(os.path.join(graph, f'{n}.npy')) for n in ('rows', 'cols', 'eids'))
    # CSC (row indices, column pointers), as GLT's loader takes with
    # input_layout='CSC': its COO path needs torch-sparse, which has no wheel here
    order = torch.sort(cols, stable=True).indices
    indptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(cols, minlength=num_nodes), 0)
    csc = part.GraphPartitionData((rows[order], indptr), eids[order])
    part.save_graph_partition(out, p, csc)
    feat = os.path.join(root, f'part{p}', 'node_feat')
    rows = part.FeaturePartitionData(
      npy(os.path.join(feat, 'feats.npy')), npy(os.path.join(feat, 'ids.npy')), None, None
    )
    part.save_feature_partition(out, p, rows)
  torch.save(npy(os.path.join(root, 'labels.npy')), os.path.join(out, 'labels.pt'))
  with open(done, 'w') as f:
    f.write('ok\n')
  return out


class StoreBarrier:
  r"""The trainers' meeting point across hosts, with the ``wait(timeout)`` of
  ``multiprocessing.Barrier``: a key per trainer in a torch ``TCPStore``
  that rank 0 holds (and keeps until rank 1 has left the barrier)."""

  def __init__(self, rank: int, master: str, port: int):
    self.rank = rank
    self.store = torch.distributed.TCPStore(
      master, port, 2, is_master=rank == 0, timeout=datetime.timedelta(seconds=BARRIER_S)
    )

  def wait(self, timeout: float) -> None:
    self.store.set(f'finished{self.rank}', '1')
    self.store.wait(['finished0', 'finished1'], datetime.timedelta(seconds=timeout))
    if self.rank == 1:
      self.store.set('left1', '1')

  def close(self) -> None:
    if self.rank == 0:
      self.store.wait(['left1'], datetime.timedelta(seconds=BARRIER_S))


def trainer(rank: int, root: str, seeds_dir: str, args, ports, results, finished) -> None:
  warnings.filterwarnings('ignore', category=FutureWarning)  # GLT's torch.load calls
  dist = glt.distributed
  torch.set_num_threads(1)
  dist.init_worker_group(2, rank, 'glt-bench')
  ds = load_partition(root, rank)
  if args.mode == 'collocated':
    options = dist.CollocatedDistSamplingWorkerOptions(
      master_addr=args.master, master_port=ports[0], num_rpc_threads=4
    )
  else:
    options = dist.MpDistSamplingWorkerOptions(
      num_workers=args.num_workers, worker_devices=[torch.device('cpu')] * args.num_workers,
      worker_concurrency=4,
      master_addr=args.master, master_port=ports[1], channel_size='512MB',
    )  # fmt: skip
  seeds = npy(os.path.join(seeds_dir, f'seeds{rank}.npy'))
  loader = dist.DistNeighborLoader(
    ds, FANOUT, seeds, batch_size=BATCH, shuffle=False, drop_last=False, edge_dir='in',
    collect_features=True, to_device=torch.device('cpu'), worker_options=options,
    random_seed=0,
  )  # fmt: skip
  results.put(timed_report(rank, loader, args))
  # Every trainer's sampling serves the others' requests for its partition:
  # none shuts down before all are through (GLT's samplers otherwise wait
  # forever on a request to a partition that left).
  finished.wait(timeout=BARRIER_S)
  loader.shutdown()
  dist.shutdown_rpc()


def load_partition(root: str, rank: int):
  r"""GLT's DistDataset of partition ``rank`` (CSC, on the CPU)."""
  ds = glt.distributed.DistDataset(edge_dir='in')
  ds.load(
    root, rank, graph_mode='CPU', input_layout='CSC', feature_with_gpu=False,
    whole_node_label_file=os.path.join(root, 'labels.pt'),
  )  # fmt: skip
  return ds


def timed_report(rank: int, loader, args) -> bytes:
  r"""Times ``args.batches`` batches of ``loader`` after ``args.warmup``: the
  pickled report ``main`` collects."""
  it = iter(loader)

  def next_batch() -> int:
    batch = next(it)
    if batch.x is None or batch.y is None:
      raise RuntimeError('GLT returned batches without features or labels')
    return batch.edge_index.size(1)

  r = timed(next_batch, args.warmup, args.batches)
  return pickle.dumps((rank, r.batches, r.edges, r.seconds, r.warmup, r.first_at))


def server(rank: int, root: str, args, ports) -> None:
  r"""GLT server ``rank`` of 2: holds partition ``rank`` and samples for its
  client in ``args.num_workers`` sampling processes, as GLT's
  server_client_mode example does."""
  warnings.filterwarnings('ignore', category=FutureWarning)
  torch.set_num_threads(1)
  ds = load_partition(root, rank)
  glt.distributed.init_server(
    num_servers=2, server_rank=rank, dataset=ds, master_addr=args.master,
    master_port=ports[0], num_clients=2,
  )  # fmt: skip
  glt.distributed.wait_and_shutdown_server()


def client(rank: int, seeds_dir: str, args, ports, results) -> None:
  r"""GLT client ``rank`` of 2: samples on server ``rank``, which reads its
  seeds from a file, as in GLT's server_client_mode example."""
  warnings.filterwarnings('ignore', category=FutureWarning)
  dist = glt.distributed
  torch.set_num_threads(1)
  dist.init_client(
    num_servers=2, num_clients=2, client_rank=rank, master_addr=args.master,
    master_port=ports[0],
  )  # fmt: skip
  options = dist.RemoteDistSamplingWorkerOptions(
    server_rank=rank, num_workers=args.num_workers,
    worker_devices=[torch.device('cpu')] * args.num_workers, worker_concurrency=4,
    master_addr=args.master, master_port=ports[1], buffer_size='512MB', prefetch_size=4,
    worker_key=f'client{rank}',
  )  # fmt: skip
  loader = dist.DistNeighborLoader(
    None, FANOUT, os.path.join(seeds_dir, f'seeds{rank}.pt'), batch_size=BATCH, shuffle=False,
    drop_last=False, edge_dir='in', collect_features=True, to_device=torch.device('cpu'),
    worker_options=options, random_seed=0,
  )  # fmt: skip
  results.put(timed_report(rank, loader, args))
  dist.shutdown_client()


def one_host_trainer(root: str, args) -> None:
  r"""Trainer ``args.rank`` in this process, one of two on two hosts; writes
  its report to ``args.out``, with the bytes its host's interface sent and
  received per batch (warm-up included; not counted on loopback)."""
  # as in the trainers spawned on one host (and GLT's examples, which spawn
  # theirs): GLT's sampling processes take locks made in the default context
  multiprocessing.set_start_method('spawn', force=True)
  finished = StoreBarrier(args.rank, args.master, args.port + 2)
  results = queue.Queue()
  ports = (args.port, args.port + 1)
  counted = args.ifname if args.ifname != 'lo' else None
  before = interface_bytes(counted)
  trainer(args.rank, root, args.seeds_dir, args, ports, results, finished)
  after = interface_bytes(counted)
  finished.close()
  _, batches, edges, seconds, warmup, first_at = pickle.loads(results.get_nowait())
  per_batch = bytes_per_batch(before, after, args.warmup + batches)
  report = dict(
    batches=batches, edges=edges, seconds=seconds, warmup=warmup, first_at=first_at,
    bytes=per_batch,
  )  # fmt: skip
  with open(args.out, 'w') as f:
    json.dump(report, f)


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('root')
  p.add_argument('seeds_dir')
  p.add_argument('--mode', choices=('collocated', 'mp', 'server-client'))
  p.add_argument('--batches', type=int, default=100, help='timed batches per trainer')
  p.add_argument('--warmup', type=int, default=20, help='untimed batches first (at least 1)')
  p.add_argument(
    '--num_workers', type=int, default=1,
    help="sampling processes per trainer ('mp') or server ('server-client')",
  )  # fmt: skip
  p.add_argument('--prepare', action='store_true', help="only write GLT's partitions")
  p.add_argument('--rank', type=int, default=None, help='run this trainer only (across hosts)')
  p.add_argument('--master', default='127.0.0.1')
  p.add_argument('--port', type=int, default=None, help='with --rank: the first of 3 ports')
  p.add_argument('--out', default=None, help="with --rank: this trainer's report (JSON)")
  p.add_argument('--ifname', default=None, help='with --rank: the interface whose bytes count')
  args = p.parse_args()
  root = write_glt_partitions(args.root)
  if args.prepare:
    return
  if args.mode is None:
    p.error('--mode is required')
  if args.rank is not None:
    if args.port is None or args.out is None:
      p.error('--rank needs --port and --out')
    return one_host_trainer(root, args)
  results, finished = SPAWN.Queue(), SPAWN.Barrier(2)
  ports = (glt.utils.get_free_port('127.0.0.1'), glt.utils.get_free_port('127.0.0.1'))
  if args.mode == 'server-client':
    for r in range(2):  # GLT's servers read a client's seeds from a file
      torch.save(npy(os.path.join(args.seeds_dir, f'seeds{r}.npy')),
                 os.path.join(args.seeds_dir, f'seeds{r}.pt'))  # fmt: skip
    servers = [SPAWN.Process(target=server, args=(r, root, args, ports)) for r in range(2)]
    clients = [
      SPAWN.Process(target=client, args=(r, args.seeds_dir, args, ports, results)) for r in range(2)
    ]
    procs = servers + clients
  else:
    procs = clients = [
      SPAWN.Process(target=trainer, args=(r, root, args.seeds_dir, args, ports, results, finished))
      for r in range(2)
    ]
  launched = time.time()
  for proc in procs:
    proc.start()
  try:
    reports = [pickle.loads(r) for r in all_reports(results, clients, 600, 'a GLT trainer')]
  finally:
    for proc in procs:
      proc.join(120)
      if proc.is_alive():
        proc.kill()
        proc.join(30)
  print(
    json.dumps(
      dict(
        glt_version=importlib.metadata.version('graphlearn-torch'),
        batches=sum(r[1] for r in reports),
        edges=sum(r[2] for r in reports),
        seconds=max(r[3] for r in reports),
        warmup=max(r[4] for r in reports),
        startup=max(r[5] for r in reports) - launched,
      )
    )
  )


if __name__ == '__main__':
  main()
