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
    "rtt" column is the measured TCP round trip of each link.
Throughput is both trainers' batches over the slower one's time. The
"vs single" column compares each row with the single-machine loader
(bench_dist_sampling.py's: glt.loader.NeighborLoader over the whole graph in
one process, 2 threads, the same fanout, batch size and features) measured
in this run before the first row and after the last, the faster of the two.
With --glt-python, GLT 0.2.4's worker mode (benchmarks/glt_dist_peer.py, one
trainer per host, 1 sampling process of concurrency 4 each) runs on each
link too, against ours at concurrency 4.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, 'test'))  # the host network fixture
sys.path.insert(0, HERE)

from results import add_results_argument  # noqa: E402

DELAYS_MS = (0.0, 1.0, 5.0)
CONCURRENCY = (1, 4, 16)
PORT = 29500
GLT_PEER = os.path.join(HERE, 'glt_dist_peer.py')

PING = """
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
times = []
for _ in range(200):
  t = time.perf_counter(); c.sendall(b'x'); c.recv(1); times.append(time.perf_counter() - t)
print(sorted(times)[100] * 1000)
"""

ECHO = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(); c, _ = s.accept()
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while (data := c.recv(1)):
  c.sendall(data)
"""


def trainer(args) -> None:
  r"""One trainer (run on its host): times its loader, writes the result."""
  import torch
  from bench_dist_sampling import time_loader

  import graphlearn_torch as glt

  torch.set_num_threads(1)
  dist = glt.distributed
  dist.init_worker_group(2, args.rank, 'bench')
  options = dist.MpDistSamplingWorkerOptions(
    num_workers=1, worker_concurrency=args.concurrency, master_addr=args.master,
    master_port=args.port, rpc_timeout=300, channel_size='512MB',
  )  # fmt: skip
  ds = dist.DistDataset(edge_dir='in').load(args.root, args.rank, graph_mode='CPU')
  with open(args.out, 'w') as f:
    json.dump(time_loader(ds, ds.node_pb, args.rank, options, args.batches), f)


def run_pair(commands, argv, env) -> list:
  r"""Runs both trainers, ``commands[r] + argv(r, out)`` for rank r, each in
  a session of its own, and returns their reports (``out``, JSON)."""
  with tempfile.TemporaryDirectory() as tmp:
    outs = [os.path.join(tmp, f'{r}.json') for r in (0, 1)]
    procs = [
      subprocess.Popen([*commands[r], *map(str, argv(r, outs[r]))], start_new_session=True, env=env)
      for r in (0, 1)
    ]
    try:
      for p in procs:
        if p.wait(timeout=1200) != 0:
          raise RuntimeError(f'a trainer failed (exit code {p.returncode})')
    finally:
      for p in procs:
        if p.poll() is None:
          os.killpg(p.pid, 9)
          p.wait()
    return [json.load(open(out)) for out in outs]


def ours(commands, master, port, root, concurrency, batches) -> tuple:
  r"""Our trainers on ``commands``' hosts: (batches, edges, the slower one's
  seconds)."""

  def argv(rank, out):
    return [
      sys.executable, __file__, 'trainer', '--rank', rank, '--master', master, '--port', port,
      '--root', root, '--concurrency', concurrency, '--batches', batches, '--out', out,
    ]  # fmt: skip

  # each namespace stands for a host: no mapping the other partition's
  # topology and feature table from this machine's shared memory
  reports = run_pair(commands, argv, dict(os.environ, GLT_SHARE_HOST_PARTITIONS='0'))
  return sum(r[0] for r in reports), sum(r[1] for r in reports), max(r[2] for r in reports)


def glt_pair(python, commands, master, port, root, seeds, batches, ifname) -> tuple:
  r"""GLT 0.2.4's worker mode (glt_dist_peer.py, 1 sampling process of
  concurrency 4 per trainer) on ``commands``' hosts, as ``ours``. Its RPC
  goes over ``ifname`` (``TP_SOCKET_IFNAME``, as GLT's users set it on a
  host with several interfaces)."""
  import bench_dist_sampling as one_host

  def argv(rank, out):
    return [
      python, GLT_PEER, root, seeds, '--mode', 'mp', '--rank', rank, '--master', master,
      '--port', port, '--batches', batches, '--warmup', one_host.WARMUP, '--out', out,
    ]  # fmt: skip

  env = dict(os.environ, TP_SOCKET_IFNAME=ifname, GLOO_SOCKET_IFNAME=ifname)
  reports = run_pair(commands, argv, env)
  return (
    sum(r['batches'] for r in reports),
    sum(r['edges'] for r in reports),
    max(r['seconds'] for r in reports),
  )


def round_trip_ms(server_prefix, client_prefix, address) -> float:
  port = PORT + 7
  echo = subprocess.Popen([*server_prefix, sys.executable, '-c', ECHO, address, str(port)])
  try:
    for _ in range(50):
      ping = subprocess.run(
        [*client_prefix, sys.executable, '-c', PING, address, str(port)],
        capture_output=True, text=True, timeout=60,
      )  # fmt: skip
      if ping.returncode == 0:
        return float(ping.stdout)
      time.sleep(0.1)  # the echo server is not listening yet
    raise RuntimeError(f'no round trip to {address}: {ping.stderr[-500:]}')
  finally:
    echo.kill()
    echo.wait()


def measure_links(args, root: str) -> tuple:
  r"""``(link, rtt ms, concurrency, batches/s, edges/s)`` of every link and
  concurrency: loopback, then 2 network-namespace hosts on a bridge and
  with each of DELAYS_MS added one way; and with ``--glt-python``, GLT's
  ``(link, batches/s)`` on each link."""
  import bench_dist_sampling as one_host
  from netns_hosts import HostNetwork, impaired_network

  rows, glt_rows = [], []
  seeds = tempfile.mkdtemp(prefix='glt-seeds-')
  if args.glt_python:
    one_host.write_trainer_seeds(root, seeds, args.batches)
    subprocess.run([args.glt_python, GLT_PEER, root, seeds, '--prepare'], check=True, timeout=900)

  def measure(label, commands, master, port, rtt):
    for c in args.concurrency:
      count, edges, seconds = ours(commands, master, port, root, c, args.batches)
      rows.append((label, rtt, c, count / seconds, edges / seconds))
      print(f'{label}, concurrency {c}: {count / seconds:.2f} batches/s', flush=True)
    if args.glt_python:
      ifname = 'eth0' if commands[0] else 'lo'  # the hosts' interface, or loopback
      count, _, seconds = glt_pair(
        args.glt_python, commands, master, port, root, seeds, args.batches, ifname
      )
      glt_rows.append((label, count / seconds))
      print(f'{label}, GLT 0.2.4: {count / seconds:.2f} batches/s', flush=True)

  try:
    here = [[], []]
    rtt = round_trip_ms([], [], '127.0.0.1')
    measure('loopback', here, '127.0.0.1', one_host.free_port(), rtt)
    with HostNetwork(2, tag=f'b{os.getpid()}') as net:
      commands = [h.command([]) for h in net.hosts]
      rtt = round_trip_ms(commands[1], commands[0], net[1].address)
      measure('2 hosts, bridge', commands, net[0].address, PORT, rtt)
    for delay in args.delays:
      net, how = impaired_network(2, delay, 0.0, tag=f'b{os.getpid()}d')
      with net:
        commands = [h.command([]) for h in net.hosts]
        rtt = round_trip_ms(commands[1], commands[0], net[1].address)
        measure(f'2 hosts, +{delay:g} ms one way ({how})', commands, net[0].address, PORT, rtt)
  finally:
    shutil.rmtree(seeds, ignore_errors=True)
  return rows, glt_rows


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
  add_results_argument(p)
  sub = p.add_subparsers(dest='role')
  t = sub.add_parser('trainer')
  for name, kind in (('rank', int), ('master', str), ('port', int), ('root', str),
                     ('concurrency', int), ('batches', int), ('out', str)):  # fmt: skip
    t.add_argument(f'--{name}', type=kind, required=True)
  args = p.parse_args()
  if args.role == 'trainer':
    return trainer(args)

  import bench_dist_sampling as one_host
  from netns_hosts import unavailable_reason
  from results import Results, Table

  reason = unavailable_reason()
  if reason is not None:
    sys.exit(f'cannot make hosts here: {reason}')
  results = Results('bench_multihost', args)
  root = one_host.partition(args.num_nodes)
  single_ds = one_host.single_machine_dataset(args.num_nodes, None)
  singles = [one_host.single_machine(single_ds, args.batches, None)]
  rows, glt_rows = measure_links(args, root)
  singles.append(one_host.single_machine(single_ds, args.batches, None))
  single = max(s[0] / s[2] for s in singles)
  base = {c: rate for label, _, c, rate, _ in rows if label == 'loopback'}
  before_after = ' / '.join(f'{s[0] / s[2]:.2f}' for s in singles)
  table = Table(
    'multihost',
    f'Worker mode across 2 hosts, {args.num_nodes:,} nodes, 2 METIS partitions, '
    '1 sampling process per trainer',
    [
      'link',
      'round trip, ms',
      'concurrency',
      'batches/s',
      'sampled edges/s',
      'vs loopback',
      'vs single machine',
    ],  # fmt: skip
    [[lbl, rtt, c, rate, e, rate / base[c], rate / single] for lbl, rtt, c, rate, e in rows],
    note=f'Hosts: network namespaces on this machine. Fanout {one_host.FANOUT}, batches of '
    f'{one_host.BATCH} seeds, features collected; the single machine before and after: '
    f'{before_after} batches/s.',
  )
  print(results.add(table).render())
  if glt_rows:
    print(results.add(glt_table(args, rows, glt_rows)).render())
  results.write()


def glt_table(args, rows, glt_rows):
  r"""Ours against GLT 0.2.4 on each link, both at concurrency 4 (GLT's
  peer's; else ours at the first concurrency measured)."""
  from results import Table

  c = 4 if 4 in args.concurrency else args.concurrency[0]
  rate = {label: r for label, _, conc, r, _ in rows if conc == c}
  return Table(
    'vs_glt',
    f"Worker mode across 2 hosts against GLT 0.2.4's, {args.num_nodes:,} nodes",
    ['link', 'ours, batches/s', 'GLT, batches/s', 'ours vs GLT'],
    [[label, rate[label], g, rate[label] / g] for label, g in glt_rows],
    note=f"Both with 1 sampling process per trainer of concurrency {c}; GLT's RPC over "
    "the hosts' interface (TP_SOCKET_IFNAME), ours over the same (found from the master's "
    'address). GLT reads the other partition over RPC, as ours does between hosts.',
  )


if __name__ == '__main__':
  main()
