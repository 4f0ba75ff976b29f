"""Worker-mode sampling across 2 hosts with added link delay, and how much
of it the asyncio sampler's concurrency hides.

  sudo python benchmarks/bench_multihost.py [--num_nodes 200000] [--batches 16]
                                           [--glt-python .venv-glt/bin/python]

Hosts are network namespaces on this machine (test/netns_hosts.py; root
needed). 2 trainers, one per host and partition, each with 1 sampling
process of ``worker_concurrency`` 1, 4 and 16 (--concurrency), sample fanout [15, 10, 5]
around batches of 1024 of their own nodes and collect features (the graph
and partitions of bench_dist_sampling.py, at --num_nodes). Rows, all
measured in this run:
  - loopback: both trainers on 127.0.0.1 in this namespace;
  - 2 hosts on a bridge (veth pairs): nothing added;
  - 2 hosts with an added one-way delay of 0, 1 and 5 ms (--delays): ``tc netem``
    where the kernel has it, else a userspace switch between TAP devices
    (test/userspace_switch.py), whose own forwarding adds latency: the
    "round trip" column is the measured TCP round trip of each link and
    "link, MB/s" its throughput one way (64 MB sent).
Throughput is both trainers' batches over the slower one's time. The
"vs single" column compares each row with the single-machine loader
(bench_dist_sampling.py's: glt.loader.NeighborLoader over the whole graph in
one process, 2 threads, the same fanout, batch size and features) measured
in this run before the first row and after the last, the faster of the two.
With --glt-python, GLT 0.2.4's worker mode (benchmarks/glt_dist_peer.py, one
trainer per host, 1 sampling process of concurrency 4 each) runs on each
link too, against ours at concurrency 4. With --dgl-python, DGL 2.1's
distributed sampling (benchmarks/dgl_dist_peer.py: on each host a
DistGraphServer and a trainer with 1 sampling process, the graph
partitioned in 2 by DGL's own METIS partitioner) runs on each link, each
machine with a /dev/shm of its own, as separate machines have (on loopback
the two listen on 127.0.0.1 and 127.0.0.2 and take their machine ids from
benchmarks/dgl_machine_id: DGL tells its machines apart by address). With
--runs N, every link runs N times back to back, ours and the peers in turn. Beside the
batches/s, every row between hosts gives the bytes each host's interface
sent and received per batch of its trainer (both trainers' mean).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import NamedTuple, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, 'test'))  # the host network fixture
sys.path.insert(0, HERE)

from dist_peers import (  # noqa: E402
  GLT_DIST_PEER,
  dgl_pair,
  dgl_partitions,
  glt_pair,
  pooled,
  run_pair,
)
from link_probe import probe_link  # noqa: E402
from netns_hosts import HOSTS_RPC_CHANNELS  # noqa: E402
from peer_protocol import bytes_per_batch, interface_bytes  # noqa: E402
from results import add_results_argument  # noqa: E402

DELAYS_MS = (0.0, 1.0, 5.0)
CONCURRENCY = (1, 4, 16)
PORT = 29500


class Row(NamedTuple):
  r"""Ours on one link at one concurrency."""

  link: str
  rtt_ms: float
  link_mb_s: float
  concurrency: int
  batches_s: float
  edges_s: float
  bytes: Optional[tuple]  # (sent, received) per batch; None on loopback
  startup_s: float  # from starting the trainers to the later first batch
  run: int = 1  # which of the --runs back to back


def trainer(args) -> None:
  r"""One trainer (run on its host): times its loader, writes the result
  and the bytes its host sent and received per batch meanwhile."""
  import torch
  from bench_dist_sampling import WARMUP, time_loader

  import graphlearn_torch as glt

  torch.set_num_threads(1)
  dist = glt.distributed
  dist.init_worker_group(2, args.rank, 'bench')
  options = dist.MpDistSamplingWorkerOptions(
    num_workers=1, worker_concurrency=args.concurrency, master_addr=args.master,
    master_port=args.port, rpc_timeout=300, channel_size='512MB',
  )  # fmt: skip
  ds = dist.DistDataset(edge_dir='in').load(args.root, args.rank, graph_mode='CPU')
  before = interface_bytes(args.ifname)
  got = time_loader(ds, ds.node_pb, args.rank, options, args.batches)
  per_batch = bytes_per_batch(before, interface_bytes(args.ifname), WARMUP + got.batches)
  report = dict(
    batches=got.batches, edges=got.edges, seconds=got.seconds, first_at=got.first_at,
    bytes=per_batch,
  )  # fmt: skip
  with open(args.out, 'w') as f:
    json.dump(report, f)


def ours(commands, master, port, root, concurrency, batches) -> tuple:
  r"""Our trainers on ``commands``' hosts, as ``pooled``."""

  def argv(rank, out):
    return [
      sys.executable, __file__, 'trainer', '--rank', rank, '--master', master, '--port', port,
      '--root', root, '--concurrency', concurrency, '--batches', batches, '--out', out,
    ] + (['--ifname', 'eth0'] if commands[0] else [])  # fmt: skip

  # each namespace stands for a host: no mapping the other partition's
  # topology and feature table from this machine's shared memory, and
  # between hosts no copying tensors from the peer's memory (TensorPipe's
  # 'cma' channel)
  env = dict(os.environ, GLT_SHARE_HOST_PARTITIONS='0')
  if commands[0]:
    env['GLT_RPC_CHANNELS'] = HOSTS_RPC_CHANNELS
  return pooled(run_pair(commands, argv, env))


def measure_links(args, root: str) -> tuple:
  r"""Every link's rows: a ``Row`` of ours at each concurrency: loopback, then 2
  network-namespace hosts on a bridge and with each of DELAYS_MS added one
  way; and with ``--glt-python`` / ``--dgl-python``, the peer's ``(link,
  batches/s, bytes per batch)`` on each link it runs on."""
  import bench_dist_sampling as one_host
  from netns_hosts import HostNetwork, impaired_network

  rows, peer_rows = [], {'glt': [], 'dgl': []}
  seeds = tempfile.mkdtemp(prefix='glt-seeds-')
  if args.glt_python:
    one_host.write_trainer_seeds(root, seeds, args.batches)
    subprocess.run(
      [args.glt_python, GLT_DIST_PEER, root, seeds, '--prepare'], check=True, timeout=900
    )
  dgl_parts = dgl_partitions(args.dgl_python, args.num_nodes) if args.dgl_python else None

  def measure(label, net, master, port, probe):
    for run in range(1, args.runs + 1):  # ours and the peers in turn, run by run
      measure_run(label, net, master, port, probe, run)

  def measure_run(label, net, master, port, probe, run):
    commands = [h.command([]) for h in net.hosts] if net else [[], []]
    for c in args.concurrency:
      count, edges, seconds, per_batch, startup = ours(
        commands, master, port, root, c, args.batches
      )
      rows.append(Row(label, *probe, c, count / seconds, edges / seconds, per_batch, startup, run))
      print(f'{label}, run {run}, concurrency {c}: {count / seconds:.2f} batches/s', flush=True)
    if args.glt_python:
      ifname = 'eth0' if net else 'lo'  # the hosts' interface, or loopback
      count, _, seconds, per_batch, startup = glt_pair(
        args.glt_python, commands, master, port, root, seeds, args.batches, ifname
      )
      peer_rows['glt'].append((label, run, count / seconds, per_batch, startup))
      print(f'{label}, run {run}, GLT 0.2.4: {count / seconds:.2f} batches/s', flush=True)
    if args.dgl_python:
      count, _, seconds, per_batch, startup = dgl_pair(
        args.dgl_python, net, dgl_parts, args.batches
      )
      peer_rows['dgl'].append((label, run, count / seconds, per_batch, startup))
      print(f'{label}, run {run}, DGL 2.1: {count / seconds:.2f} batches/s', flush=True)

  try:
    probe = probe_link([], [], '127.0.0.1')
    measure('loopback', None, '127.0.0.1', one_host.free_port(), probe)
    with HostNetwork(2, tag=f'b{os.getpid()}') as net:
      probe = probe_link(net[1].command([]), net[0].command([]), net[1].address)
      measure('2 hosts, bridge', net, net[0].address, PORT, probe)
    for delay in args.delays:
      net, how = impaired_network(2, delay, 0.0, tag=f'b{os.getpid()}d')
      with net:
        probe = probe_link(net[1].command([]), net[0].command([]), net[1].address)
        measure(f'2 hosts, +{delay:g} ms one way ({how})', net, net[0].address, PORT, probe)
  finally:
    shutil.rmtree(seeds, ignore_errors=True)
  return rows, peer_rows


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--num_nodes', type=int, default=200_000)
  p.add_argument('--batches', type=int, default=16, help='timed batches per trainer')
  p.add_argument(
    '--concurrency', type=int, nargs='+', default=list(CONCURRENCY),
    help="each trainer's sampling process's worker_concurrency, one row each",
  )  # fmt: skip
  p.add_argument(
    '--delays', type=float, nargs='*', default=list(DELAYS_MS),
    help='one-way delays (ms) added between the hosts, a link each',
  )  # fmt: skip
  p.add_argument(
    '--glt-python', default=None,
    help="GLT 0.2.4's environment's python (make glt-peer): its worker mode on each link",
  )  # fmt: skip
  p.add_argument(
    '--dgl-python', default=None,
    help="DGL 2.1's environment's python (make dgl-peer): its distributed sampling on each "
    'link between hosts',
  )  # fmt: skip
  p.add_argument(
    '--runs', type=int, default=1,
    help='runs on each link back to back, ours and the peers in turn',
  )  # fmt: skip
  add_results_argument(p)
  sub = p.add_subparsers(dest='role')
  t = sub.add_parser('trainer')
  for name, kind in (('rank', int), ('master', str), ('port', int), ('root', str),
                     ('concurrency', int), ('batches', int), ('out', str)):  # fmt: skip
    t.add_argument(f'--{name}', type=kind, required=True)
  t.add_argument('--ifname', default=None, help="the host's interface whose bytes count")
  args = p.parse_args()
  if args.role == 'trainer':
    return trainer(args)

  import bench_dist_sampling as one_host
  from netns_hosts import unavailable_reason
  from results import Results

  reason = unavailable_reason()
  if reason is not None:
    sys.exit(f'cannot make hosts here: {reason}')
  # a SIGTERM unwinds like an error: the trainers' sessions are killed and
  # the hosts removed on the way out
  signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
  results = Results('bench_multihost', args)
  root = one_host.partition(args.num_nodes)
  single_ds = one_host.single_machine_dataset(args.num_nodes, None)
  singles = [one_host.single_machine(single_ds, args.batches, None)]
  rows, peer_rows = measure_links(args, root)
  singles.append(one_host.single_machine(single_ds, args.batches, None))
  print(results.add(links_table(args, rows, singles)).render())
  for peer, peer_row in peer_rows.items():
    if peer_row:
      print(results.add(peer_table(args, peer, rows, peer_row)).render())
  results.write()


def kb(per_batch, direction: int):
  r"""Kilobytes of ``per_batch`` (sent, received) in ``direction``; None
  where not counted (loopback)."""
  return None if per_batch is None else per_batch[direction] / 1e3


def links_table(args, rows, singles):
  r"""Ours on every link and at every concurrency."""
  import bench_dist_sampling as one_host
  from results import Table

  single = max(s[0] / s[2] for s in singles)
  base = {(r.run, r.concurrency): r.batches_s for r in rows if r.link == 'loopback'}
  before_after = ' / '.join(f'{s[0] / s[2]:.2f}' for s in singles)
  return Table(
    'multihost',
    f'Worker mode across 2 hosts, {args.num_nodes:,} nodes, 2 METIS partitions, '
    '1 sampling process per trainer',
    [
      'link',
      'run',
      'round trip, ms',
      'link, MB/s',
      'concurrency',
      'batches/s',
      'sampled edges/s',
      'vs loopback',
      'vs single machine',
      'sent per batch, KB',
      'received per batch, KB',
      'start to first batch, s',
    ],  # fmt: skip
    [
      [
        r.link,
        r.run,
        *r[1:6],
        r.batches_s / base[(r.run, r.concurrency)],
        r.batches_s / single,
        kb(r.bytes, 0),
        kb(r.bytes, 1),
        r.startup_s,
      ]
      for r in rows
    ],  # fmt: skip
    note=f'Hosts: network namespaces on this machine. Fanout {one_host.FANOUT}, batches of '
    f'{one_host.BATCH} seeds, features collected; the single machine before and after: '
    f"{before_after} batches/s. Bytes: each host's interface over its trainer's batches "
    "(warm-up included), the two hosts' mean; not counted on loopback.",
  )


PEERS = {
  'glt': (
    'GLT 0.2.4',
    "GLT's RPC over the hosts' interface (TP_SOCKET_IFNAME), ours over the same (found "
    "from the master's address). GLT reads the other partition over RPC, as ours does "
    'between hosts.',
  ),
  'dgl': (
    'DGL 2.1',
    'DGL on its own METIS partitions of the same graph (dgl.distributed.partition_graph), '
    'a DistGraphServer and a trainer per host, features pulled per batch with '
    "g.ndata[...], as DGL's GraphSAGE example does; on loopback its two machines listen "
    'on 127.0.0.1 and 127.0.0.2, each with a /dev/shm of its own.',
  ),
}


def peer_table(args, peer: str, rows, peer_rows):
  r"""Ours against ``peer`` (a key of PEERS) on each link it ran on, ours at
  concurrency 4 (else the first concurrency measured)."""
  from results import Table

  name, how = PEERS[peer]
  c = 4 if 4 in args.concurrency else args.concurrency[0]
  ours_at = {(r.link, r.run): r for r in rows if r.concurrency == c}
  return Table(
    f'vs_{peer}',
    f"Worker mode across 2 hosts against {name}'s, {args.num_nodes:,} nodes",
    [
      'link',
      'run',
      'ours, batches/s',
      f'{name}, batches/s',
      f'ours vs {name}',
      'ours, KB sent/batch',
      'ours, KB received/batch',
      f'{name}, KB sent/batch',
      f'{name}, KB received/batch',
      'ours, start to first batch, s',
      f'{name}, start to first batch, s',
      f'ours vs {name} (start)',
    ],  # fmt: skip
    [
      [
        label,
        run,
        ours_at[label, run].batches_s,
        rate,
        ours_at[label, run].batches_s / rate,
        kb(ours_at[label, run].bytes, 0),
        kb(ours_at[label, run].bytes, 1),
        kb(b, 0),
        kb(b, 1),
        ours_at[label, run].startup_s,
        startup,
        ours_at[label, run].startup_s / startup,
      ]
      for label, run, rate, b, startup in peer_rows
    ],  # fmt: skip
    note=f'Both with 1 sampling process per trainer (ours of concurrency {c}). {how} Start '
    "to first batch: from starting both hosts' trainers (and DGL's servers) to the later "
    'first batch.',
  )


if __name__ == '__main__':
  main()
