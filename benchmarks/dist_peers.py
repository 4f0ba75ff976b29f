"""The peers' distributed jobs, each run in its own environment: GLT 0.2.4's
worker and server-client modes (glt_dist_peer.py) and DGL 2.1's distributed
sampling (dgl_dist_peer.py), and the two-process runs that ours and theirs
share (``run_pair``, ``pooled``), for bench_dist_sampling.py,
bench_server_client.py and bench_multihost.py."""

import json
import os
import signal
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PORT = 29510  # DGL's servers' port between hosts
GLT_DIST_PEER = os.path.join(HERE, 'glt_dist_peer.py')
DGL_PEER = os.path.join(HERE, 'dgl_dist_peer.py')
DGL_SAMPLERS = 1  # DGL's sampling processes per trainer, as ours here
DGL_MACHINE_ID_SITE = os.path.join(HERE, 'dgl_machine_id')  # sitecustomize: see its docstring
LOOPBACK_DGL_ADDRESSES = ('127.0.0.1', '127.0.0.2')
# a /dev/shm of its own, as a separate machine has (DGL names its shared
# memory by graph, so two of its machines on one /dev/shm collide)
OWN_SHM = ['unshare', '--mount', '--propagation', 'private', 'sh', '-c',
           'mount -t tmpfs tmpfs /dev/shm && exec "$@"', 'sh']  # fmt: skip


def glt_worker_mode(python: str, root: str, mode: str, batches: int, num_workers: int = 1):
  r"""GLT's worker mode ('collocated' or 'mp') or its 'server-client' mode
  (glt_dist_peer.py in GLT's environment ``python``, ``num_workers`` sampling
  processes per trainer or server) on ``root``'s partitions with our
  trainers' seeds, as ``run_timed`` reports."""
  import bench_dist_sampling as one_host

  with tempfile.TemporaryDirectory() as work:
    one_host.write_trainer_seeds(root, work, batches)
    command = [python, GLT_DIST_PEER, root, work, '--mode', mode, '--batches', str(batches)]
    command += ['--warmup', str(one_host.WARMUP), '--num_workers', str(num_workers)]
    returncode, stdout, stderr = run_process_group(command, work, timeout=900)
  if returncode != 0:
    raise RuntimeError(f'glt_dist_peer.py --mode {mode} failed ({returncode}):\n{stderr[-3000:]}')
  r = json.loads(stdout.strip().splitlines()[-1])
  return r['batches'], r['edges'], r['seconds'], r['warmup'], r['startup']


def run_process_group(command: list, work: str, timeout: float) -> tuple:
  r"""Runs ``command`` in a session of its own, its output in files under
  ``work`` (a process it leaves behind cannot hold a pipe open), and kills
  whatever of the session is left when it ends or after ``timeout`` s.
  Returns the exit code (None on timeout), stdout and stderr."""
  out_path, err_path = os.path.join(work, 'stdout'), os.path.join(work, 'stderr')
  with open(out_path, 'w') as out, open(err_path, 'w') as err:
    proc = subprocess.Popen(command, stdout=out, stderr=err, start_new_session=True)
    try:
      returncode = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      returncode = None
    finally:
      try:
        os.killpg(proc.pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
      proc.wait()
  with open(out_path) as out, open(err_path) as err:
    return returncode, out.read(), err.read()


def run_pair(commands, argv, env) -> list:
  r"""Runs both trainers, ``commands[r] + argv(r, out)`` for rank r, each in
  a session of its own, and returns their reports (``out``, JSON), each
  with ``launched`` (``time.time()`` before the first was started)."""
  launched = time.time()
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
    return [dict(json.load(open(out)), launched=launched) for out in outs]


def pooled(reports) -> tuple:
  r"""Both trainers' reports as one: (batches, edges, the slower one's
  seconds, (sent, received) bytes per batch, the hosts' mean, or None, and
  the seconds from starting the trainers to the later first batch)."""
  per_batch = None
  if reports[0].get('bytes') is not None:
    per_batch = tuple(sum(r['bytes'][d] for r in reports) / len(reports) for d in (0, 1))
  return (
    sum(r['batches'] for r in reports),
    sum(r['edges'] for r in reports),
    max(r['seconds'] for r in reports),
    per_batch,
    max(r['first_at'] for r in reports) - reports[0]['launched'],
  )


def glt_pair(python, commands, master, port, root, seeds, batches, ifname) -> tuple:
  r"""GLT 0.2.4's worker mode (glt_dist_peer.py, 1 sampling process of
  concurrency 4 per trainer) on ``commands``' hosts, as ``ours``. Its RPC
  goes over ``ifname`` (``TP_SOCKET_IFNAME``, as GLT's users set it on a
  host with several interfaces)."""
  import bench_dist_sampling as one_host

  def argv(rank, out):
    return [
      python, GLT_DIST_PEER, root, seeds, '--mode', 'mp', '--rank', rank, '--master', master,
      '--port', port, '--batches', batches, '--warmup', one_host.WARMUP, '--out', out,
      '--ifname', ifname,
    ]  # fmt: skip

  env = dict(os.environ, TP_SOCKET_IFNAME=ifname, GLOO_SOCKET_IFNAME=ifname)
  return pooled(run_pair(commands, argv, env))


def dgl_pair(python, net, parts, batches) -> tuple:
  r"""DGL 2.1's distributed sampling (dgl_dist_peer.py: a server and a
  trainer with DGL_SAMPLERS sampling processes per machine, each machine
  with a /dev/shm of its own) on ``net``'s 2 hosts, or on loopback for
  ``net`` None, over DGL's partitions ``parts``, as ``pooled``. On loopback
  the machines listen on 127.0.0.1 and 127.0.0.2 and learn their machine
  ids from DGL_MACHINE_ID_SITE (DGL would take both for machine 0)."""
  import bench_dist_sampling as one_host

  if net is None:
    addresses, port = LOOPBACK_DGL_ADDRESSES, one_host.free_port()
    commands = [[*OWN_SHM, 'env', f'DGL_BENCH_MACHINE_ID={r}'] for r in (0, 1)]
    path = os.pathsep.join(p for p in (DGL_MACHINE_ID_SITE, os.environ.get('PYTHONPATH')) if p)
    env, ifname = dict(os.environ, PYTHONPATH=path), []
  else:
    addresses, port = [h.address for h in net.hosts], PORT
    commands = [h.command(OWN_SHM) for h in net.hosts]
    env, ifname = os.environ, ['--ifname', 'eth0']
  with tempfile.NamedTemporaryFile('w', suffix='.txt') as ip_config:
    ip_config.write(''.join(f'{address} {port}\n' for address in addresses))
    ip_config.flush()

    def argv(rank, out):
      return [
        python, DGL_PEER, 'machine', parts, '--rank', rank, '--ip_config', ip_config.name,
        '--num_samplers', DGL_SAMPLERS, '--batches', batches, '--warmup', one_host.WARMUP,
        '--report', out, *ifname,
      ]  # fmt: skip

    return pooled(run_pair(commands, argv, env))


def dgl_partitions(python, num_nodes: int) -> str:
  r"""DGL's own 2 METIS partitions of bench_dist_sampling.py's graph, made
  once (cached beside ours); returns their directory."""
  import bench_dist_sampling as one_host

  out = os.path.join(one_host.CACHE, f'{num_nodes}-dgl-metis-2')
  if not os.path.exists(os.path.join(out, 'bench.json')):
    graph = os.path.join(out, 'graph')
    one_host.write_graph_arrays(num_nodes, graph)
    subprocess.run([python, DGL_PEER, 'prepare', graph, out], check=True, timeout=3600)
  return out


def dgl_loopback(python: str, num_nodes: int, batches: int) -> tuple:
  r"""DGL's 2 machines on loopback over its partitions of bench_dist_sampling.py's
  graph of ``num_nodes`` nodes, ``batches`` timed batches each, as ``pooled``."""
  return dgl_pair(python, None, dgl_partitions(python, num_nodes), batches)
