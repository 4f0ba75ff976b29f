"""Several real hosts on one machine (network namespaces joined by a bridge,
test/netns_hosts.py): worker mode and server-client mode across hosts whose
master address is not loopback, GraphSAGE across hosts against loopback,
and a host whose link is cut mid-epoch. Each process runs in its host's
namespace; every process is reaped and every namespace removed, also when a
test fails. Skips where network namespaces cannot be made (not root)."""

import os
import re
import subprocess
import sys
import time
from collections import defaultdict

import pytest
import torch
from conftest import kill_sessions
from netns_hosts import (
  HOSTS_RPC_CHANNELS,
  HostNetwork,
  impaired_network,
  namespaces,
  unavailable_reason,
)
from output_lines import OutputLines
from test_dist_sampling import free_port, partition

import graphlearn_torch as glt

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
JOB = os.path.join(HERE, 'multihost_job.py')
EXAMPLE = os.path.join(ROOT, 'examples', 'distributed', 'dist_train_sage_supervised.py')
JOB_TIMEOUT_S = 240
ERROR_WITHIN_S = 30
PORT = 29500  # each host is a fresh namespace: every port is free there

_unavailable = unavailable_reason()
pytestmark = [
  pytest.mark.skipif(_unavailable is not None, reason=str(_unavailable)),
  pytest.mark.slow,  # spawned processes: left out of make test-fast
]


def environment() -> dict:
  # Each namespace stands for a host of its own: partitions must not map
  # each other's topologies and feature tables from this machine's shared
  # memory, nor RPC peers copy tensors from each other's memory (TensorPipe's
  # 'cma' channel): everything crosses the link.
  return dict(
    os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE]), PYTHONUNBUFFERED='1',
    GLT_SHARE_HOST_PARTITIONS='0', GLT_RPC_CHANNELS=HOSTS_RPC_CHANNELS,
  )  # fmt: skip


def job(host, *args) -> subprocess.Popen:
  return host.popen(
    [sys.executable, JOB, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    env=environment(),
  )  # fmt: skip


def finish(procs, timeout=JOB_TIMEOUT_S):
  r"""Every process's output, once all have exited; kills them all (their
  sessions: the sampling processes too) on a timeout or an error."""
  outs = []
  deadline = time.monotonic() + timeout
  try:
    for p in procs:
      outs.append(p.communicate(timeout=max(deadline - time.monotonic(), 1))[0])
  finally:
    kill_sessions(procs)
  return outs


def session_alive(pid: int) -> bool:
  r"""Whether a process of the session ``pid`` led still runs."""
  for entry in os.listdir('/proc'):
    if entry.isdigit():
      try:
        with open(f'/proc/{entry}/stat') as f:
          fields = f.read().rsplit(')', 1)[1].split()
      except OSError:
        continue
      if int(fields[3]) == pid and fields[0] not in ('Z', 'X'):
        return True
  return False


@pytest.fixture
def network():
  r"""A factory of host networks; checks that they leave nothing behind."""
  before_ns, before_links = set(namespaces()), root_links()
  made = []

  def make(num_hosts, delay_ms=None, loss_percent=0.0):
    tag = f'{os.getpid()}{len(made)}'
    if delay_ms is None:
      made.append(HostNetwork(num_hosts, tag))
      return made[-1]
    net, how = impaired_network(num_hosts, delay_ms, loss_percent, tag)
    made.append(net)
    return net, how

  try:
    yield make
  finally:
    for net in made:
      net.close()
  assert set(namespaces()) == before_ns, 'every namespace is removed'
  assert root_links() == before_links, 'nothing is left in the machine namespace'


def root_links():
  out = subprocess.run(['ip', '-o', 'link'], capture_output=True, text=True, timeout=30).stdout
  return {line.split(':')[1].strip() for line in out.splitlines()}


@pytest.fixture(scope='module')
def graph_root(tmp_path_factory):
  root = str(tmp_path_factory.mktemp('multihost'))
  partition(root, 2, hetero=False)
  return root


# -- the reference: full-fanout sampling on the whole graph -------------------


def full_fanout(graph, seeds, hops=2):
  r"""Brute force: the edge ids and nodes that two full hops from ``seeds``
  reach along out-edges (hop 2 from the nodes hop 1 found first)."""
  out_edges = defaultdict(list)
  for e, u in enumerate(graph['src'].tolist()):
    out_edges[u].append(e)
  dst = graph['dst'].tolist()
  seen, frontier, edges = set(seeds), list(seeds), set()
  for _ in range(hops):
    found = []
    for u in frontier:
      for e in out_edges[u]:
        edges.add(e)
        if dst[e] not in seen:
          seen.add(dst[e])
          found.append(dst[e])
    frontier = found
  return edges, seen


def single_process(graph, seeds):
  r"""The same seeds through the single-process loader on the whole graph."""
  ds = glt.data.Dataset(edge_dir='out')
  edges = torch.stack([graph['src'], graph['dst']])
  ds.init_graph(edges, graph_mode='CPU', num_nodes=graph['num_nodes'])
  ds.init_node_features(graph['x'])
  (batch,) = glt.loader.NeighborLoader(ds, [-1, -1], seeds, batch_size=seeds.numel())
  return set(batch.node.tolist()), batch.edge_index.size(1)


def check_against_full_graph(batches, graph, seeds) -> None:
  covered = torch.sort(torch.cat([b['seeds'] for b in batches])).values
  assert torch.equal(covered, torch.sort(seeds).values), 'every seed once'
  for b in batches:
    edges, nodes = full_fanout(graph, b['seeds'].tolist())
    assert set(b['e_id'].tolist()) == edges, 'the edges of two full hops'
    assert set(b['n_id'].tolist()) == nodes and b['n_id'].unique().numel() == b['n_id'].numel()
    local_nodes, num_edges = single_process(graph, b['seeds'])
    assert local_nodes == nodes and num_edges == len(edges), 'as the single-process loader'
    assert torch.equal(b['x'], graph['x'][b['n_id']]) and torch.equal(b['y'], graph['y'][b['n_id']])
    src, dst = b['n_id'][b['edge_index'][1]], b['n_id'][b['edge_index'][0]]
    assert torch.equal(graph['src'][b['e_id']], src) and torch.equal(graph['dst'][b['e_id']], dst)


def load_graph(root):
  return torch.load(os.path.join(root, 'full.pt'), weights_only=False)


def train_seeds(root, parts):
  ds = [glt.distributed.DistDataset(edge_dir='out').load(root, r, graph_mode='CPU') for r in parts]
  return torch.cat([d.train_idx for d in ds])


def assert_done(outs):
  for out in outs:
    assert out.rstrip().endswith('DONE'), out[-3000:]


# -- worker mode ---------------------------------------------------------------


def check_worker_mode(net, graph_root, tmp_path) -> None:
  r"""2 hosts x 1 trainer sample full-fanout batches of the whole graph."""
  master = net[0].address
  outs = finish([
    job(net[r], 'trainer', r, 2, master, PORT, graph_root, tmp_path / f'{r}.pt')
    for r in (0, 1)
  ])  # fmt: skip
  assert_done(outs)
  graph = load_graph(graph_root)
  for r in (0, 1):
    batches = torch.load(tmp_path / f'{r}.pt')
    check_against_full_graph(batches, graph, train_seeds(graph_root, [r]))


def test_worker_mode_across_two_hosts(network, graph_root, tmp_path):
  check_worker_mode(network(2), graph_root, tmp_path)


def test_server_client_across_three_hosts(network, graph_root, tmp_path):
  net = network(3)  # hosts 0 and 1 serve, host 2 trains
  master = net[0].address
  servers = [job(net[r], 'server', r, 2, master, PORT, graph_root, 1) for r in (0, 1)]
  client = job(net[2], 'client', 2, master, PORT, graph_root, tmp_path / 'client.pt')
  assert_done(finish([client, *servers]))
  batches = torch.load(tmp_path / 'client.pt')
  check_against_full_graph(batches, load_graph(graph_root), train_seeds(graph_root, [0, 1]))


# -- GraphSAGE across hosts and on loopback -------------------------------------


def sage_argv(data_dir, node_rank, master, ports):
  return [str(a) for a in [
    sys.executable, EXAMPLE, '--dataset_root_dir', data_dir, '--synthetic_nodes', '3000',
    '--epochs', '8', '--batch_size', '64', '--no-progress', '--num_nodes', '2',
    '--num_training_procs', '1', '--node_rank', node_rank, '--master_addr', master,
    '--timeout', '60', '--training_pg_master_port', ports[0],
    '--train_loader_master_port', ports[1], '--test_loader_master_port', ports[2],
  ]]  # fmt: skip


def accuracy(out: str) -> float:
  found = re.search(r'final test accuracy (\S+)', out)
  assert found, out[-3000:]
  return float(found.group(1))


def test_graphsage_across_hosts_matches_loopback(network, tmp_path):
  data_dir = str(tmp_path / 'data')
  ports = [free_port() for _ in range(3)]
  loopback = [
    subprocess.Popen(
      sage_argv(data_dir, r, '127.0.0.1', ports),
      stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT,
      text=True,
      env=environment(),
      start_new_session=True,
    )  # fmt: skip
    for r in (0, 1)
  ]
  on_loopback = accuracy(finish(loopback)[0])
  net = network(2)
  across = [
    net[r].popen(
      sage_argv(data_dir, r, net[0].address, [PORT, PORT + 1, PORT + 2]),
      stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT,
      text=True,
      env=environment(),
    )  # fmt: skip
    for r in (0, 1)
  ]
  on_hosts = accuracy(finish(across)[0])
  print(f'GraphSAGE, 8 epochs: {on_hosts:.4f} across 2 hosts, {on_loopback:.4f} on loopback')
  assert on_hosts > 0.6 and on_loopback > 0.6, 'well above chance (1/8)'
  assert abs(on_hosts - on_loopback) < 0.05


# -- faults ----------------------------------------------------------------------


def cut_and_expect_error(net, survivor, lost_host, lost_peer, everyone, within=ERROR_WITHIN_S):
  before_shm = set(os.listdir('/dev/shm'))
  lines = OutputLines(survivor.stdout)
  lines.until(lambda line: line.startswith('RUNNING'), JOB_TIMEOUT_S, what='RUNNING')
  cut_at = time.monotonic()
  net.cut(lost_host)
  out = lines.until(lambda line: line.startswith('ERROR-END'), within + 10, what='ERROR-END')
  raised_after = time.monotonic() - cut_at
  message = out.split('ERROR ', 1)[1]
  print(f'raised {raised_after:.1f} s after the cut: {message[:400]}')
  assert raised_after < within, message
  assert lost_peer in message, f'the error names the lost peer {lost_peer}: {message}'
  rest = lines.rest(60)
  survivor.wait(timeout=60)
  assert 'DONE' in rest, rest[-2000:]
  deadline = time.monotonic() + 30
  while session_alive(survivor.pid) and time.monotonic() < deadline:
    time.sleep(0.1)
  assert not session_alive(survivor.pid), "the survivor's sampling processes exit"
  kill_sessions(everyone)  # the cut-off host's processes, which cannot tell
  deadline = time.monotonic() + 15
  while set(os.listdir('/dev/shm')) - before_shm and time.monotonic() < deadline:
    time.sleep(0.1)
  assert set(os.listdir('/dev/shm')) - before_shm == set(), 'no shared memory is left'


def test_a_trainer_host_cut_off_mid_epoch(network, graph_root, tmp_path):
  net = network(2)
  master = net[0].address
  procs = [
    job(net[r], 'trainer', r, 2, '--timeout', 25, master, PORT, graph_root,
        tmp_path / f'{r}.pt', '--until-error')
    for r in (0, 1)
  ]  # fmt: skip
  try:
    cut_and_expect_error(net, procs[0], 1, net[1].address, procs)
  finally:
    kill_sessions(procs)


def test_a_server_host_cut_off_mid_epoch(network, graph_root, tmp_path):
  net = network(3)
  master = net[0].address
  # A lost server stalls the other server's hops into its partition too, and
  # a new epoch's start waits for it: the client may see up to three RPC
  # timeouts one after the other (20 s and 9.9 s measured with 10 s).
  timeout = ['--timeout', 10]
  procs = [job(net[r], 'server', r, 2, *timeout, master, PORT, graph_root, 1) for r in (0, 1)]
  client = job(
    net[2], 'client', 2, *timeout, master, PORT, graph_root, tmp_path / 'c.pt', '--until-error'
  )
  try:
    cut_and_expect_error(net, client, 1, net[1].address, [client, *procs], within=35)
  finally:
    kill_sessions([client, *procs])


def test_a_lossy_slow_link_still_gives_the_right_batches(network, graph_root, tmp_path):
  # tc netem where the kernel has it, else a userspace switch that delays
  # and drops frames between the hosts' TAP interfaces
  net, how = network(2, delay_ms=2, loss_percent=1)
  print(f'2 ms one-way delay and 1% loss by {how}')
  check_worker_mode(net, graph_root, tmp_path)


# -- launch.py across hosts ------------------------------------------------------


def test_launch_starts_a_job_on_two_hosts(network, tmp_path):
  paramiko = pytest.importorskip('paramiko')  # noqa: F841 (test_launch's sshd needs it)
  from test_launch import (
    LAUNCH,
    SSHD,
    cluster,
    ensure_debian_packages,
    start_sshd,
    stop_sshd,
    write_config,
  )

  ensure_debian_packages([(SSHD, 'openssh-server'), ('tmux', 'tmux')])
  net = network(3)  # hosts 0 and 1 run the job; host 2 is the operator's machine
  daemons, tmux_dirs = [], []
  config = tmp_path / 'cluster.yml'

  def launch(*args):
    return net[2].run([sys.executable, LAUNCH, '-c', config, *args], timeout=120)

  try:
    for r in (0, 1):
      home = tmp_path / f'sshd{r}'
      home.mkdir()
      # one tmux server per host, started by that host's sshd in its namespace
      tmux_dir = tmp_path / f'tmux{r}'
      tmux_dir.mkdir()
      tmux_dirs.append(tmux_dir)
      daemons.append(
        start_sshd(home, net[r].address, 22, net[r].popen, [f'TMUX_TMPDIR={tmux_dir}'])
      )
    values = cluster(22, str(tmp_path / 'sshd0' / 'user_key'), tmp_path)
    values.update(nodes=[net[0].address, net[1].address])
    # one key for both hosts, as the cluster file names one
    (tmp_path / 'sshd1' / 'authorized_keys').write_text(
      (tmp_path / 'sshd0' / 'authorized_keys').read_text()
    )
    job_name = f'hosts{os.getpid()}'
    log_dir = tmp_path / 'logs'
    write_config(
      config, **values, job_name=job_name, log_dir=str(log_dir),
      args={'synthetic_nodes': 3000, 'num_workers': 1, 'fanout': [5, 5], 'no-progress': True},
    )  # fmt: skip
    started = launch('start', '--epochs', '3', '--batch_size', '32', '--master_port', PORT)
    assert started.returncode == 0, started.stderr
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while 'running' in (status := launch('status')).stdout:
      assert time.monotonic() < deadline, f'the job still runs after {JOB_TIMEOUT_S} s'
      time.sleep(1)
    logs = launch('logs', '-n', '200')
    assert status.stdout.count(': finished') == 2, status.stdout + logs.stdout
    assert f'@{net[0].address}' in status.stdout and f'@{net[1].address}' in status.stdout
    first = (log_dir / f'{job_name}-node0.log').read_text()
    second = (log_dir / f'{job_name}-node1.log').read_text()
    assert '[trainer 1]' in second and 'epoch 3' in second, second[-2000:]
    assert float(re.search(r'final test accuracy (\S+)', first).group(1)) > 0.3
    assert '==> node 0' in logs.stdout and '==> node 1' in logs.stdout
    stopped = launch('stop')
    assert stopped.stdout.count('no session') == 2, stopped.stdout  # both had ended
  finally:
    if config.exists():
      launch('stop')
    for tmux_dir in tmux_dirs:  # a session a failed start left behind
      env = dict(os.environ, TMUX_TMPDIR=str(tmux_dir))
      subprocess.run(['tmux', 'kill-server'], env=env, capture_output=True, timeout=30)
    for daemon in daemons:
      stop_sshd(daemon)
