"""launch.py against a real sshd on loopback: a 2-node worker-mode job (two
ssh "nodes" on this machine, each in its own tmux session) runs to the end,
``status``, ``logs`` and ``stop`` report on it, and YAML values reach the
remote shell quoted. Debian's openssh-server and tmux are installed when
missing; the test skips only when they cannot be."""

import importlib.util
import os
import pwd
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml

import graphlearn_torch as glt

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

paramiko = pytest.importorskip('paramiko')

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH = os.path.join(ROOT, 'launch.py')
SSHD = '/usr/sbin/sshd'
JOB_S = 300


def ensure_debian_packages(binaries_to_packages) -> None:
  missing = [pkg for path, pkg in binaries_to_packages if not shutil.which(path)]
  if not missing:
    return
  if os.geteuid() != 0 or not shutil.which('apt-get'):
    pytest.skip(f'{missing} missing and apt-get unusable here')
  install = ['apt-get', 'install', '-y', '-q', '--no-install-recommends', *missing]
  env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
  for attempt in (install, ['apt-get', 'update', '-q'], install):
    done = subprocess.run(attempt, env=env, capture_output=True, timeout=600)
    if attempt is install and done.returncode == 0:
      return
  pytest.skip(f'cannot install {missing}: {done.stderr.decode()[-500:]}')


def free_port(count: int = 1) -> int:
  r"""A loopback port ``p`` with ``p .. p + count - 1`` all free, outside the
  kernel's ephemeral range."""
  return glt.utils.get_free_port('127.0.0.1', count)


def start_sshd(home, address: str, port: int, popen=subprocess.Popen, environment=()):
  r"""An sshd on ``address:port`` that lets this user in with a throw-away
  key (``home/user_key``), its files in ``home``; started by ``popen`` (a
  host's, to run it in that host's namespace), ``environment`` (``NAME=value``
  strings) set in its sessions, and this process's TMPDIR (the test
  session's, which conftest removes: the files PyG writes there go with it).
  Returns the process once it listens."""
  if os.environ.get('TMPDIR'):
    environment = [*environment, f'TMPDIR={os.environ["TMPDIR"]}']
  host_key, user_key = paramiko.RSAKey.generate(2048), paramiko.RSAKey.generate(2048)
  host_key.write_private_key_file(str(home / 'host_key'))
  user_key.write_private_key_file(str(home / 'user_key'))
  (home / 'authorized_keys').write_text(f'{user_key.get_name()} {user_key.get_base64()}\n')
  config = home / 'sshd_config'
  set_env = f'SetEnv {" ".join(environment)}\n' if environment else ''
  config.write_text(
    f'Port {port}\nListenAddress {address}\nHostKey {home}/host_key\n'
    f'AuthorizedKeysFile {home}/authorized_keys\nPidFile {home}/sshd.pid\n'
    'StrictModes no\nUsePAM no\nPasswordAuthentication no\n'
    'KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nPermitRootLogin yes\n' + set_env
  )
  os.makedirs('/run/sshd', exist_ok=True)  # its privilege-separation directory
  checked = subprocess.run([SSHD, '-t', '-f', str(config)], capture_output=True, timeout=30)
  assert checked.returncode == 0, checked.stderr.decode()
  proc = popen([SSHD, '-D', '-e', '-f', str(config)], stderr=subprocess.PIPE)
  deadline = time.monotonic() + 30  # it writes its pid file once it listens
  while not (home / 'sshd.pid').exists() and proc.poll() is None:
    assert time.monotonic() < deadline, 'sshd did not start within 30 s'
    time.sleep(0.1)
  assert proc.poll() is None, proc.stderr.read().decode()
  return proc


def stop_sshd(proc) -> None:
  proc.terminate()
  try:
    proc.wait(10)
  except subprocess.TimeoutExpired:
    proc.kill()
    proc.wait()


@pytest.fixture(scope='module')
def sshd(tmp_path_factory):
  r"""``(port, private key file)`` of an sshd on 127.0.0.1 that lets this
  user in with a throw-away key; stopped at the end."""
  ensure_debian_packages([(SSHD, 'openssh-server'), ('tmux', 'tmux')])
  home = tmp_path_factory.mktemp('sshd')
  port = free_port()
  proc = start_sshd(home, '127.0.0.1', port)
  try:
    yield port, str(home / 'user_key')
  finally:
    stop_sshd(proc)


def launch(config_path, *args, timeout=120) -> subprocess.CompletedProcess:
  return subprocess.run(
    [sys.executable, LAUNCH, '-c', str(config_path), *args],
    capture_output=True,
    text=True,
    timeout=timeout,
  )


def write_config(path, **values) -> None:
  with open(path, 'w') as f:
    yaml.safe_dump(values, f)


def user() -> str:
  return pwd.getpwuid(os.getuid()).pw_name


def cluster(port, key, root, **extra):
  return dict(
    dataset='synthetic',
    dataset_root_dir=str(root / 'data dir'),
    nodes=['127.0.0.1', '127.0.0.1'],
    ports=[port, port],
    usernames=[user()] * 2,
    python_bins=[sys.executable] * 2,
    dst_paths=[ROOT, ROOT],
    visible_devices=['', ''],
    num_training_procs=1,
    key_filename=key,
    **extra,
  )


def test_two_node_job_over_ssh(sshd, tmp_path):
  port, key = sshd
  job = f'test{os.getpid()}'
  log_dir = tmp_path / 'logs $(touch PWNED); x'  # quoted, or the shell would run it
  config = tmp_path / 'cluster.yml'
  write_config(
    config,
    **cluster(port, key, tmp_path),
    job_name=job,
    log_dir=str(log_dir),
    args={'synthetic_nodes': 3000, 'num_workers': 1, 'fanout': [5, 5], 'no-progress': True},
  )
  try:
    base = free_port(3)
    started = launch(
      config, 'start', '--epochs', '3', '--batch_size', '32', '--master_port', str(base)
    )
    assert started.returncode == 0, started.stderr
    assert f'glt-{job}-0' in started.stderr and f'glt-{job}-1' in started.stderr
    deadline = time.monotonic() + JOB_S
    while True:
      status = launch(config, 'status')
      if 'running' not in status.stdout:
        break
      assert time.monotonic() < deadline, f'the job still runs after {JOB_S} s'
      time.sleep(1)
    logs = launch(config, 'logs', '-n', '200')
    assert status.returncode == 0 and status.stdout.count(': finished') == 2, (
      status.stdout + logs.stdout
    )
    node_logs = sorted(os.listdir(log_dir))
    assert node_logs == [f'{job}-node{r}.log{ext}' for r in (0, 1) for ext in ('', '.exit')]
    assert not os.path.exists(os.path.join(ROOT, 'PWNED')) and not (tmp_path / 'PWNED').exists()
    first = (log_dir / f'{job}-node0.log').read_text()
    second = (log_dir / f'{job}-node1.log').read_text()
    assert '[trainer 1]' in second and 'epoch 3' in second
    accuracy = float(re.search(r'final test accuracy (\S+)', first).group(1))
    print(f'2-node job over ssh: final test accuracy {accuracy:.4f}')
    assert accuracy > 0.3, 'well above chance (1/8)'
    assert '==> node 0' in logs.stdout and '==> node 1' in logs.stdout
    assert (tmp_path / 'data dir' / 'synthetic3000-partitions' / 'META.json').exists()
  finally:
    stopped = launch(config, 'stop')
  assert stopped.stdout.count('no session') == 2, stopped.stdout  # both had ended


SLEEP_OR_FAIL = """import sys, time
if sys.argv[sys.argv.index('--node_rank') + 1] == '0':
  time.sleep(600)
sys.exit(3)
"""


def test_status_and_stop_of_a_running_job(sshd, tmp_path):
  port, key = sshd
  script = tmp_path / 'sleep_or_fail.py'  # node 0 sleeps, node 1 exits with 3
  script.write_text(SLEEP_OR_FAIL)
  config = tmp_path / 'cluster.yml'
  job = f'stop{os.getpid()}'
  write_config(
    config, **cluster(port, key, tmp_path), job_name=job, script=str(script),
    log_dir=str(tmp_path / 'logs'),
  )  # fmt: skip
  try:
    started = launch(config, 'start', '--master_port', str(free_port(3)))
    assert started.returncode == 0, started.stderr
    deadline = time.monotonic() + 60
    while 'failed' not in (status := launch(config, 'status')).stdout:
      assert time.monotonic() < deadline, status.stdout
      time.sleep(0.5)
    assert status.returncode == 1
    assert status.stdout.splitlines()[0].endswith(': running')
    assert status.stdout.splitlines()[1].endswith(': failed (exit code 3)')
    stopped = launch(config, 'stop')
    assert stopped.stdout.splitlines()[0].endswith(': stopped')
    assert stopped.stdout.splitlines()[1].endswith(': no session')
    assert 'node 0 (' in launch(config, 'status').stdout.splitlines()[0]
    assert ': not running' in launch(config, 'status').stdout.splitlines()[0]
    deadline = time.monotonic() + 10
    while subprocess.run(['pgrep', '-f', str(script)], capture_output=True).returncode == 0:
      assert time.monotonic() < deadline, 'the killed session left its process running'
      time.sleep(0.1)
  finally:
    launch(config, 'stop')


def test_unreachable_node_names_it(tmp_path):
  config = tmp_path / 'cluster.yml'
  closed = free_port()
  write_config(config, **cluster(closed, None, tmp_path), job_name='x')
  done = launch(config, 'status', timeout=60)
  assert done.returncode != 0
  assert f'node 0 ({user()}@127.0.0.1:{closed}): cannot connect' in done.stderr


def test_glt_invocation_without_a_command_starts(tmp_path):
  # GLT's documented command line: no sub-command, start's options after the config.
  config = tmp_path / 'cluster.yml'
  closed = free_port()
  write_config(config, **cluster(closed, None, tmp_path), job_name='x')
  done = subprocess.run(
    [sys.executable, LAUNCH, f'--config={config}', '--master_addr=0.0.0.0',
     '--master_port=11234', '--epochs', '1', '--batch_size', '64'],
    capture_output=True, text=True, timeout=60,
  )  # fmt: skip
  assert 'No such option' not in done.stderr
  assert done.returncode != 0  # start ran: it reached for node 0, which is closed
  assert f'node 0 ({user()}@127.0.0.1:{closed}): cannot connect' in done.stderr
  helped = subprocess.run([sys.executable, LAUNCH, '--help'], capture_output=True, text=True)
  assert helped.returncode == 0 and 'status' in helped.stdout and 'stop' in helped.stdout


@pytest.mark.parametrize(
  'change, message',
  [
    ({'dst_paths': None}, "the key 'dst_paths' is missing"),
    ({'ports': [22]}, 'ports must list one entry per node (2 nodes)'),
    ({'ports': [22, 'ssh']}, "ports entry of node 1 must be an integer, not 'ssh'"),
    ({'usernames': ['a', None]}, 'usernames has no entry for node 1 (127.0.0.1)'),
    ({'mode': 'server_client', 'num_servers': 2}, 'num_servers must leave at least one'),
    ({'colour': 'blue'}, "unknown keys ['colour']"),
    ({'ports': [22, 70000]}, 'ports entry of node 1 must be an integer from 1 to 65535, not 70000'),
    ({'ports': [22, 22.7]}, 'ports entry of node 1 must be an integer, not 22.7'),
    ({'ports': [22, True]}, 'ports entry of node 1 must be an integer, not True'),
    ({'num_training_procs': 'two'}, "num_training_procs must be an integer, not 'two'"),
    ({'num_training_procs': 0}, 'num_training_procs must be an integer from 1, not 0'),
  ],
)
def test_bad_cluster_file_names_the_key(tmp_path, change, message):
  values = cluster(22, None, tmp_path)
  for key, value in change.items():
    if value is None:
      values.pop(key)
    else:
      values[key] = value
  config = tmp_path / 'cluster.yml'
  write_config(config, **values)
  done = launch(config, 'status', timeout=60)
  assert done.returncode != 0 and message in done.stderr, done.stderr


def load_module(path: str):
  spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.mark.parametrize('mode', ['worker', 'server_client'])
def test_every_node_command_line_parses_with_its_example(tmp_path, mode):
  r"""What ``start`` would run on each node is accepted by that node's
  example parser, with the role, rank and ports the launcher means."""
  launcher = load_module(LAUNCH)
  config = tmp_path / 'cluster.yml'
  extra = {'mode': mode, 'num_servers': 1} if mode == 'server_client' else {}
  values = cluster(22, None, tmp_path, in_channel=32, out_channel=8, **extra)
  values.update(nodes=['10.0.0.1', '10.0.0.2', '10.0.0.3'], ports=[22] * 3)
  for key in ('usernames', 'python_bins', 'dst_paths', 'visible_devices'):
    values[key] = values[key][:1] * 3
  values['args'] = {'num_workers': 2, 'fanout': [5, 3], 'no-progress': True}
  write_config(config, **values)
  parsed = launcher.ClusterConfig.from_yaml(str(config))
  launch_args = launcher.LaunchArgs(
    epochs=4, batch_size=16, master_addr='10.0.0.1', master_port=9000
  )
  for node in parsed.nodes:
    script, *argv = launcher.script_argv(parsed, node, launch_args)
    args = load_module(os.path.join(ROOT, script)).parser().parse_args(argv)
    assert args.master_addr == '10.0.0.1'
    if mode == 'worker':
      assert (args.node_rank, args.num_nodes, args.num_training_procs) == (node.rank, 3, 1)
      assert (args.training_pg_master_port, args.test_loader_master_port) == (9000, 9002)
      assert (args.epochs, args.batch_size, args.fanout, args.num_workers) == (4, 16, [5, 3], 2)
      assert (args.in_channel, args.out_channel, args.progress) == (32, 8, False)
    elif node.rank == 0:
      assert script.endswith('sage_supervised_server.py')
      assert (args.num_servers, args.num_clients, args.server_rank_start) == (1, 2, 0)
      assert (args.num_local_servers, args.num_dataset_partitions, args.master_port) == (1, 1, 9000)
    else:
      assert script.endswith('sage_supervised_client.py')
      assert (args.client_rank_start, args.num_local_clients) == (node.rank - 1, 1)
      assert (args.master_port, args.training_pg_master_port, args.epochs) == (9000, 9001, 4)
