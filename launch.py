"""Start, watch and stop a distributed graphlearn_torch job over ssh.

One YAML file describes the cluster, with the keys of GLT's launcher (every
key: docs/distributed.md, "Launching on a cluster")::

  python launch.py -c cluster.yml start --epochs 10 --batch_size 512 \\
      --master_addr 10.0.0.1 --master_port 11234
  python launch.py -c cluster.yml status     # running / finished / failed per node
  python launch.py -c cluster.yml logs -n 20 # the tail of each node's log
  python launch.py -c cluster.yml stop       # kill the tmux sessions

Each node runs its script in a detached tmux session with ``node_rank``,
``num_nodes`` and the master address and ports filled in, its output going to
``<log_dir>/<job_name>-node<rank>.log`` and its exit code to ``.exit`` beside
it. Every value from the YAML is shell-quoted before it reaches a remote
shell. Every process of a launch gets ``GLT_JOB_ID``, an id of its own, so a
process of another launch at the same ports is refused by name. Needs
paramiko, click and pyyaml (dependencies of graphlearn-torch).

PyTorch RPC has no authentication: anything that can reach the job's ports
(``master_port`` to ``master_port + 2`` at ``master_addr``, and the ephemeral
ports TensorPipe and gloo listen on) can run code in its processes. Run jobs
on a trusted network, or behind a firewall that admits only the cluster's
machines.
"""

import dataclasses
import logging
import os
import shlex
import socket
import sys
import uuid
from typing import Any, Dict, List, Optional, Tuple

import click
import paramiko
import yaml

log = logging.getLogger('launch')

WORKER_SCRIPT = 'examples/distributed/dist_train_sage_supervised.py'
SERVER_SCRIPT = 'examples/distributed/server_client_mode/sage_supervised_server.py'
CLIENT_SCRIPT = 'examples/distributed/server_client_mode/sage_supervised_client.py'
PER_NODE_KEYS = ('nodes', 'ports', 'usernames', 'python_bins', 'dst_paths')
CONNECT_TIMEOUT_S = 15.0
COMMAND_TIMEOUT_S = 60.0


class ConfigError(click.ClickException):
  r"""The cluster file is wrong; the message names the key and the node."""


@dataclasses.dataclass
class Node:
  r"""One machine of the cluster.

  Args:
    rank: its node rank (its place in ``nodes``).
    host: the address ssh connects to.
    port: the ssh port.
    username: the ssh user.
    python_bin: the Python that runs the script there.
    dst_path: the repository checkout there; scripts and logs are relative to it.
    visible_devices: ``CUDA_VISIBLE_DEVICES`` there ('' for none).
  """

  rank: int
  host: str
  port: int
  username: str
  python_bin: str
  dst_path: str
  visible_devices: str = ''

  def __str__(self) -> str:
    return f'node {self.rank} ({self.username}@{self.host}:{self.port})'


@dataclasses.dataclass
class ClusterConfig:
  r"""A parsed cluster file (see the module docstring for the keys)."""

  nodes: List[Node]
  dataset: str
  dataset_root_dir: str
  job_name: str
  mode: str = 'worker'
  script: str = WORKER_SCRIPT
  server_script: str = SERVER_SCRIPT
  client_script: str = CLIENT_SCRIPT
  num_servers: int = 1
  num_training_procs: Optional[int] = None
  in_channel: Optional[int] = None
  out_channel: Optional[int] = None
  args: Dict[str, Any] = dataclasses.field(default_factory=dict)
  server_args: Dict[str, Any] = dataclasses.field(default_factory=dict)
  env: Dict[str, Any] = dataclasses.field(default_factory=dict)
  log_dir: str = 'logs'
  key_filename: Optional[str] = None

  @classmethod
  def from_yaml(cls, path: str) -> 'ClusterConfig':
    r"""Reads and checks ``path``; a missing or malformed key raises
    :class:`ConfigError` naming it (and the node, for per-node keys)."""
    try:
      with open(path) as f:
        raw = yaml.safe_load(f)
    except OSError as e:
      raise ConfigError(f'cannot read the cluster file {path}: {e}') from e
    except yaml.YAMLError as e:
      raise ConfigError(f'the cluster file {path} is not valid YAML: {e}') from e
    if not isinstance(raw, dict):
      raise ConfigError(f'the cluster file {path} must hold a mapping of keys')
    for key in PER_NODE_KEYS + ('dataset', 'dataset_root_dir'):
      if key not in raw:
        raise ConfigError(f'{path}: the key {key!r} is missing')
    hosts = raw['nodes']
    if not isinstance(hosts, list) or not hosts:
      raise ConfigError(f'{path}: nodes must be a non-empty list of addresses')
    devices = raw.get('visible_devices', [''] * len(hosts))
    per_node = {key: raw[key] for key in PER_NODE_KEYS}
    per_node['visible_devices'] = devices
    for key, values in per_node.items():
      if not isinstance(values, list) or len(values) != len(hosts):
        raise ConfigError(f'{path}: {key} must list one entry per node ({len(hosts)} nodes)')
      for rank, value in enumerate(values):
        if value is None and key != 'visible_devices':
          raise ConfigError(f'{path}: {key} has no entry for node {rank} ({hosts[rank]})')
    nodes = [
      Node(
        rank=rank,
        host=str(hosts[rank]),
        port=_int(raw['ports'][rank], f'{path}: ports entry of node {rank}', 1, 65535),
        username=str(raw['usernames'][rank]),
        python_bin=str(raw['python_bins'][rank]),
        dst_path=str(raw['dst_paths'][rank]),
        visible_devices='' if devices[rank] is None else str(devices[rank]),
      )
      for rank in range(len(hosts))
    ]
    field_names = {f.name for f in dataclasses.fields(cls)}
    # in_memory is GLT's key: partitions are memory-mapped here either way
    unknown = sorted(set(raw) - field_names - set(per_node) - {'in_memory'})
    if unknown:
      raise ConfigError(f'{path}: unknown keys {unknown}')
    fields = {k: v for k, v in raw.items() if k in field_names}
    fields.pop('nodes')
    fields.setdefault('job_name', os.path.splitext(os.path.basename(path))[0])
    config = cls(nodes=nodes, **fields)
    config._check(path)
    return config

  def _check(self, path: str) -> None:
    for key, low in (('num_training_procs', 1), ('num_servers', 1), ('in_channel', 1)):
      value = getattr(self, key, None)
      if value is not None:
        setattr(self, key, _int(value, f'{path}: {key}', low))
    if self.out_channel is not None:
      self.out_channel = _int(self.out_channel, f'{path}: out_channel', 1)
    if self.mode not in ('worker', 'server_client'):
      raise ConfigError(f"{path}: mode must be 'worker' or 'server_client', not {self.mode!r}")
    if self.mode == 'server_client' and not 0 < self.num_servers < len(self.nodes):
      raise ConfigError(
        f'{path}: num_servers must leave at least one of the {len(self.nodes)} nodes a client'
      )
    for key in ('args', 'server_args', 'env'):
      if not isinstance(getattr(self, key), dict):
        raise ConfigError(f'{path}: {key} must be a mapping')
    if not self.job_name.replace('-', '').replace('_', '').isalnum():
      raise ConfigError(f'{path}: job_name may hold letters, digits, - and _ only')

  def session(self, node: Node) -> str:
    r"""The tmux session of ``node``."""
    return f'glt-{self.job_name}-{node.rank}'

  def log_path(self, node: Node) -> str:
    r"""The log file of ``node`` (relative to its ``dst_path`` unless absolute)."""
    return os.path.join(self.log_dir, f'{self.job_name}-node{node.rank}.log')


def _int(value: Any, what: str, low: int = 0, high: Optional[int] = None) -> int:
  r"""``value`` as an integer in ``[low, high]``: a whole number (or its
  digits as a string), never a float, a bool or a number out of range."""
  if isinstance(value, bool) or not isinstance(value, (int, str)):
    raise ConfigError(f'{what} must be an integer, not {value!r}')
  try:
    number = int(value)
  except ValueError:
    raise ConfigError(f'{what} must be an integer, not {value!r}') from None
  if number < low or (high is not None and number > high):
    upper = '' if high is None else f' to {high}'
    raise ConfigError(f'{what} must be an integer from {low}{upper}, not {value!r}')
  return number


@dataclasses.dataclass
class LaunchArgs:
  r"""What ``start`` fills into every node's command line.

  Args:
    epochs: training epochs.
    batch_size: seeds per batch.
    master_addr: the rendezvous address every node reaches.
    master_port: the first of the job's ports (worker mode uses it and the
      next two: DDP, train loader, test loader; server-client mode uses it
      for the servers and clients and the next one for the clients' DDP).
    job_id: this launch's identity (``GLT_JOB_ID`` of every process): a
      process of another job at the same ports is refused by name.
  """

  epochs: int
  batch_size: int
  master_addr: str
  master_port: int
  job_id: str = dataclasses.field(default_factory=lambda: f'launch-{uuid.uuid4().hex[:12]}')


def flags(values: Dict[str, Any]) -> List[str]:
  r"""``--key value`` pairs; ``True`` is a bare flag, ``False``/``None``
  are left out and lists give several values."""
  out: List[str] = []
  for key, value in values.items():
    if value is None or value is False:
      continue
    out.append(f'--{key}')
    if value is True:
      continue
    out += [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
  return out


def script_argv(config: ClusterConfig, node: Node, launch: LaunchArgs) -> List[str]:
  r"""The script and its arguments on ``node`` (unquoted): the data, the
  node's role and rendezvous, then ``args`` (``server_args`` on servers)."""
  data = {'dataset': config.dataset, 'dataset_root_dir': config.dataset_root_dir}
  training = {
    'epochs': launch.epochs,
    'batch_size': launch.batch_size,
    'in_channel': config.in_channel,
    'out_channel': config.out_channel,
  }
  num_nodes, addr, port = len(config.nodes), launch.master_addr, launch.master_port
  if config.mode == 'worker':
    procs = config.num_training_procs or len([d for d in node.visible_devices.split(',') if d])
    procs = max(procs, 1)
    script, values = config.script, {
      **data, **training, 'num_nodes': num_nodes, 'node_rank': node.rank,
      'num_dataset_partitions': num_nodes * procs, 'num_training_procs': procs,
      'master_addr': addr, 'training_pg_master_port': port,
      'train_loader_master_port': port + 1, 'test_loader_master_port': port + 2,
      **config.args,
    }  # fmt: skip
  elif node.rank < config.num_servers:
    script, values = config.server_script, {
      **data, 'num_servers': config.num_servers, 'num_clients': num_nodes - config.num_servers,
      'num_dataset_partitions': config.num_servers, 'num_local_servers': 1,
      'server_rank_start': node.rank, 'master_addr': addr, 'master_port': port,
      **config.server_args,
    }  # fmt: skip
  else:
    script, values = config.client_script, {
      **training, 'num_servers': config.num_servers, 'num_clients': num_nodes - config.num_servers,
      'num_local_clients': 1, 'client_rank_start': node.rank - config.num_servers,
      'master_addr': addr, 'master_port': port, 'training_pg_master_port': port + 1,
      **config.args,
    }  # fmt: skip
  return [script] + flags(values)


def node_command(config: ClusterConfig, node: Node, launch: LaunchArgs) -> str:
  r"""The remote shell command that starts ``node``'s tmux session. Every
  YAML value in it is quoted once for the shell that tmux starts and once
  more for the ssh shell."""
  env = {'CUDA_VISIBLE_DEVICES': node.visible_devices} if node.visible_devices else {}
  env['GLT_JOB_ID'] = f'{config.job_name}-{launch.job_id}'
  env.update({str(k): str(v) for k, v in config.env.items()})
  for key in env:
    if not key.isidentifier():
      raise ConfigError(f'env: {key!r} is not a variable name')
  exports = [f'{k}={shlex.quote(v)}' for k, v in env.items()]
  argv = [node.python_bin] + script_argv(config, node, launch)
  log_file = shlex.quote(config.log_path(node))
  run = ' '.join((['env'] + exports if exports else []) + [shlex.quote(a) for a in argv])
  # Inside tmux: the script's output to the log, its exit code beside it.
  inner = f'({run}; echo $? > {log_file}.exit) > {log_file} 2>&1'
  session = shlex.quote(config.session(node))
  log_dir = shlex.quote(os.path.dirname(config.log_path(node)) or '.')
  return (
    f'cd {shlex.quote(node.dst_path)} && mkdir -p {log_dir} && rm -f {log_file}.exit && '
    f'tmux new-session -d -s {session} {shlex.quote(inner)}'
  )


class Remote:
  r"""An ssh connection to one node (a context manager).

  Args:
    node: the node.
    key_filename: a private key file; else the agent and ~/.ssh keys.
    password: the password, if the node takes one.
    strict_host_keys: refuse hosts missing from known_hosts (else warn).
  """

  def __init__(
    self,
    node: Node,
    key_filename: Optional[str] = None,
    password: Optional[str] = None,
    strict_host_keys: bool = False,
  ):
    self.node = node
    self.client = paramiko.SSHClient()
    self.client.load_system_host_keys()
    self.client.set_missing_host_key_policy(
      paramiko.RejectPolicy() if strict_host_keys else paramiko.WarningPolicy()
    )
    self.key_filename = os.path.expanduser(key_filename) if key_filename else None
    self.password = password

  def __enter__(self) -> 'Remote':
    try:
      self.client.connect(
        self.node.host,
        port=self.node.port,
        username=self.node.username,
        password=self.password,
        key_filename=self.key_filename,
        timeout=CONNECT_TIMEOUT_S,
        banner_timeout=CONNECT_TIMEOUT_S,
        auth_timeout=CONNECT_TIMEOUT_S,
      )
    except (OSError, paramiko.SSHException) as e:
      self.client.close()
      raise click.ClickException(f'{self.node}: cannot connect: {type(e).__name__}: {e}') from e
    return self

  def __exit__(self, *exc) -> None:
    self.client.close()

  def run(self, command: str, timeout: float = COMMAND_TIMEOUT_S) -> Tuple[int, str, str]:
    r"""Runs ``command`` in the remote shell; ``(exit code, stdout, stderr)``."""
    try:
      _, stdout, stderr = self.client.exec_command(command, timeout=timeout)
      out, err = stdout.read().decode(errors='replace'), stderr.read().decode(errors='replace')
      return stdout.channel.recv_exit_status(), out, err
    except (OSError, socket.timeout, paramiko.SSHException) as e:
      raise click.ClickException(f'{self.node}: {command!r} failed: {e}') from e


@dataclasses.dataclass
class Session:
  r"""What every command gets from the global options; the cluster file is
  read on first use (so ``--help`` needs none)."""

  config_path: str
  key: Optional[str]
  ask_password: bool
  strict_host_keys: bool
  _config: Optional[ClusterConfig] = None

  @property
  def config(self) -> ClusterConfig:
    if self._config is None:
      self._config = ClusterConfig.from_yaml(self.config_path)
    return self._config

  def each_node(self):
    r"""``(node, connected Remote)`` for every node, in rank order."""
    passwords: Dict[Tuple[str, str], str] = {}
    for node in self.config.nodes:
      login = (node.username, node.host)
      if self.ask_password and login not in passwords:
        prompt = f'password for {node.username}@{node.host}'
        passwords[login] = click.prompt(prompt, hide_input=True)
      key = self.key or self.config.key_filename
      with Remote(node, key, passwords.get(login), self.strict_host_keys) as remote:
        yield node, remote


def _status(config: ClusterConfig, node: Node, remote: Remote) -> str:
  session = shlex.quote(config.session(node))
  exit_file = shlex.quote(config.log_path(node) + '.exit')
  code, _, _ = remote.run(f'tmux has-session -t {session} 2>/dev/null')
  if code == 0:
    return 'running'
  code, out, _ = remote.run(f'cd {shlex.quote(node.dst_path)} && cat {exit_file}')
  if code != 0:
    return 'not running (no exit code: never started, or killed)'
  rc = out.strip()
  return 'finished' if rc == '0' else f'failed (exit code {rc})'


class StartByDefault(click.Group):
  r"""A command group whose command is ``start`` when none is named, so GLT's
  ``python launch.py --config=cluster.yml --master_addr=... --master_port=...``
  runs as it is."""

  def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
    takes_value = {
      name: not param.is_flag
      for param in self.params
      if isinstance(param, click.Option)
      for name in param.opts + param.secondary_opts
    }
    i = 0  # skip the group's own options
    while i < len(args) and args[i].split('=', 1)[0] in takes_value:
      i += 2 if takes_value[args[i].split('=', 1)[0]] and '=' not in args[i] else 1
    rest = args[i:]
    named = rest and (rest[0] in self.commands or rest[0] in ('--help', '-h'))
    if not named and (rest or i > 0):
      args = args[:i] + ['start'] + rest
    return super().parse_args(ctx, args)


@click.group(cls=StartByDefault)
@click.option(
  '-c',
  '--config',
  'config_path',
  default='examples/distributed/dist_train_sage_sup_config.yml',
  show_default=True,
  help='The cluster file.',
)
@click.option('--key', default=None, help='A private key file (overrides key_filename).')
@click.option('--password', is_flag=True, help='Prompt for each user@host password.')
@click.option('--strict-host-keys', 'strict', is_flag=True, help='Refuse unknown host keys.')
@click.option('-v', '--verbose', is_flag=True, help='Log the commands sent.')
@click.pass_context
def cli(ctx: click.Context, config_path: str, key, password: bool, strict: bool, verbose: bool):
  r"""Start, watch and stop a graphlearn_torch job on the nodes of a cluster file.

  With no command, ``start`` (GLT's ``launch.py --config=... --master_addr=...``)."""
  logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format='%(message)s')
  logging.getLogger('paramiko').setLevel(logging.WARNING)
  ctx.obj = Session(config_path, key, password, strict)


@cli.command()
@click.option('--epochs', type=int, default=10, show_default=True)
@click.option('--batch_size', type=int, default=512, show_default=True)
@click.option('--master_addr', default=None, help='Default: the first node.')
@click.option('--master_port', type=int, default=11234, show_default=True)
@click.pass_context
def start(ctx: click.Context, epochs: int, batch_size: int, master_addr, master_port: int):
  r"""Start the script on every node in a tmux session."""
  config = ctx.obj.config
  launch = LaunchArgs(epochs, batch_size, master_addr or config.nodes[0].host, master_port)
  commands = {node.rank: node_command(config, node, launch) for node in config.nodes}
  for node, remote in ctx.obj.each_node():
    log.debug('%s: %s', node, commands[node.rank])
    code, out, err = remote.run(commands[node.rank])
    if code != 0:
      raise click.ClickException(
        f'{node}: could not start tmux session {config.session(node)} '
        f'(exit code {code}): {(err or out).strip()}'
      )
    session, log_path = config.session(node), config.log_path(node)
    log.info('%s: started tmux session %s, log %s', node, session, log_path)


@cli.command()
@click.pass_context
def status(ctx: click.Context):
  r"""Say for each node whether its job runs, finished or failed."""
  config = ctx.obj.config
  failed = False
  for node, remote in ctx.obj.each_node():
    state = _status(config, node, remote)
    failed |= state.startswith('failed')
    click.echo(f'{node}: {state}')
  ctx.exit(1 if failed else 0)


@cli.command()
@click.option('-n', '--lines', type=int, default=20, show_default=True)
@click.pass_context
def logs(ctx: click.Context, lines: int):
  r"""Print the tail of each node's log."""
  config = ctx.obj.config
  for node, remote in ctx.obj.each_node():
    log_file = shlex.quote(config.log_path(node))
    code, out, err = remote.run(f'cd {shlex.quote(node.dst_path)} && tail -n {lines} {log_file}')
    click.echo(f'==> {node}: {config.log_path(node)} <==')
    click.echo(out if code == 0 else f'(no log: {err.strip()})')


@cli.command()
@click.pass_context
def stop(ctx: click.Context):
  r"""Kill every node's tmux session (its processes get SIGHUP)."""
  config = ctx.obj.config
  for node, remote in ctx.obj.each_node():
    code, _, _ = remote.run(f'tmux kill-session -t {shlex.quote(config.session(node))}')
    click.echo(f'{node}: ' + ('stopped' if code == 0 else 'no session'))


if __name__ == '__main__':
  cli(prog_name=os.path.basename(sys.argv[0]), auto_envvar_prefix='GLT_LAUNCH')
