"""Real hosts on one machine: network namespaces joined by a bridge.

``HostNetwork(n)`` makes ``n`` hosts, each a network namespace with its own
loopback and one interface ``eth0`` holding a private address, plus a switch
namespace holding the bridge that joins them (veth pairs, one end in the
switch, the other in the host). Nothing is made in the caller's namespace,
so nothing here can clash with the machine's own interfaces or addresses,
and removing the namespaces removes every veth and the bridge with them.

A process runs on a host through ``ip netns exec``; it sees only the host's
interfaces, shares the machine's filesystem (a shared filesystem between
the hosts) and /dev/shm. ``cut(i)`` takes host ``i``'s link down (its peers
see silence, not a reset, as when a cable is pulled); ``impair(i, ...)``
adds ``tc netem`` delay and loss, where the kernel has netem. Where it has
not, ``HostNetwork(n, emulated_link=(delay_ms, loss_percent))`` joins the
hosts' TAP interfaces through a userspace switch (userspace_switch.py) that
delays and drops frames instead of the bridge; those links carry jumbo
frames (MTU 9000), which lets the switch forward about 300 MB/s one way on
2 cores.
"""

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from output_lines import OutputLines

SUBNET = '10.231.{}.{}'
# RPC peers on one machine copy tensors straight from each other's memory
# (TensorPipe's 'cma' channel), from separate network namespaces too: the
# processes of hosts made here offer only the channels separate machines
# have (GLT_RPC_CHANNELS), so that every tensor crosses the link.
HOSTS_RPC_CHANNELS = 'mpt_uv,basic'
SWITCH_MTU = 9000  # the userspace switch's links' frames, bytes
SWITCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'userspace_switch.py')
SWITCH_START_S = 60  # the userspace switch's start: an interpreter, its taps opened


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
  done = subprocess.run(['ip', *args], capture_output=True, text=True, timeout=30)
  if check and done.returncode != 0:
    raise RuntimeError(f'ip {" ".join(args)}: {done.stderr.strip()}')
  return done


def namespaces() -> List[str]:
  r"""The names of the machine's network namespaces (``ip netns list``)."""
  out = _ip('netns', 'list').stdout
  return [line.split()[0] for line in out.splitlines() if line.strip()]


def unavailable_reason() -> Optional[str]:
  r"""Why hosts cannot be made here, or None when they can."""
  if os.geteuid() != 0:
    return 'network namespaces need root'
  if shutil.which('ip') is None:
    return "iproute2's ip is missing"
  probe = f'glt-probe-{os.getpid()}'
  made = _ip('netns', 'add', probe, check=False)
  if made.returncode != 0:
    return f'cannot create a network namespace: {made.stderr.strip()}'
  try:
    veth = _ip(
      '-n', probe, 'link', 'add', 'probe0', 'type', 'veth', 'peer', 'name', 'probe1', check=False
    )
    if veth.returncode != 0:
      return f'cannot create a veth pair: {veth.stderr.strip()}'
  finally:
    _ip('netns', 'del', probe, check=False)
  return None


@dataclass
class Host:
  r"""One host: a network namespace and its address on the hosts' network.

  Args:
    namespace: the network namespace's name.
    address: its IPv4 address on ``eth0``.
  """

  namespace: str
  address: str

  def command(self, argv: Sequence[str]) -> List[str]:
    r"""``argv`` run on this host."""
    return ['ip', 'netns', 'exec', self.namespace, *map(str, argv)]

  def popen(self, argv: Sequence[str], **kwargs) -> subprocess.Popen:
    r"""Starts ``argv`` on this host in a session of its own."""
    return subprocess.Popen(self.command(argv), start_new_session=True, **kwargs)

  def run(self, argv: Sequence[str], timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(self.command(argv), capture_output=True, text=True, timeout=timeout)


class HostNetwork:
  r"""``num_hosts`` hosts on a private bridge; a context manager that
  removes every namespace it made on exit, also after a failure.

  Args:
    num_hosts: how many hosts.
    tag: a short distinct name part (several networks may exist at once).
    emulated_link: ``(one-way delay in ms, loss in percent)`` of a userspace
      switch that joins the hosts instead of the bridge (no ``cut``, no
      ``impair`` then).
  """

  def __init__(
    self,
    num_hosts: int,
    tag: Optional[str] = None,
    emulated_link: Optional[Tuple[float, float]] = None,
  ):
    tag = tag or str(os.getpid())
    self.prefix = f'glt-{tag}'
    self.switch = f'{self.prefix}-sw'
    self.hosts: List[Host] = []
    self._made: List[str] = []
    self._switch_process: Optional[subprocess.Popen] = None
    subnet = os.getpid() % 250 + 1
    try:
      if emulated_link is None:
        self._add_namespace(self.switch)
        _ip('-n', self.switch, 'link', 'add', 'br0', 'type', 'bridge')
        _ip('-n', self.switch, 'link', 'set', 'br0', 'up')
      for i in range(num_hosts):
        host = Host(f'{self.prefix}-h{i}', SUBNET.format(subnet, i + 1))
        self._add_namespace(host.namespace)
        if emulated_link is None:
          port = f'p{i}'
          _ip('-n', self.switch, 'link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0',
              'netns', host.namespace)  # fmt: skip
          _ip('-n', self.switch, 'link', 'set', port, 'master', 'br0', 'up')
        else:
          _ip('-n', host.namespace, 'tuntap', 'add', 'dev', 'eth0', 'mode', 'tap')
          # jumbo frames, as data-centre links carry: a sixth of the frames
          # for the switch to forward per byte
          _ip('-n', host.namespace, 'link', 'set', 'eth0', 'mtu', str(SWITCH_MTU))
        _ip('-n', host.namespace, 'addr', 'add', f'{host.address}/24', 'dev', 'eth0')
        _ip('-n', host.namespace, 'link', 'set', 'eth0', 'up')
        _ip('-n', host.namespace, 'link', 'set', 'lo', 'up')
        self.hosts.append(host)
      if emulated_link is not None:
        self._start_switch(*emulated_link)
    except BaseException:
      self.close()
      raise

  def _start_switch(self, delay_ms: float, loss_percent: float) -> None:
    self._switch_process = subprocess.Popen(
      [sys.executable, SWITCH, str(delay_ms), str(loss_percent),
       *(h.namespace for h in self.hosts)],
      stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:  # READY, or the end of its output when it failed
      line = OutputLines(self._switch_process.stdout).first_line(SWITCH_START_S)
    except AssertionError as e:
      raise RuntimeError(f'the userspace switch did not start: {e}') from None
    if line.strip() != 'READY':
      raise RuntimeError(f'the userspace switch did not start: {line!r}')

  def _add_namespace(self, name: str) -> None:
    _ip('netns', 'add', name)
    self._made.append(name)

  def __enter__(self) -> 'HostNetwork':
    return self

  def __exit__(self, *exc) -> None:
    self.close()

  def __getitem__(self, i: int) -> Host:
    return self.hosts[i]

  def cut(self, i: int) -> None:
    r"""Takes host ``i``'s link down: its packets stop, nothing is reset."""
    _ip('-n', self.switch, 'link', 'set', f'p{i}', 'down')

  def restore(self, i: int) -> None:
    _ip('-n', self.switch, 'link', 'set', f'p{i}', 'up')

  def impair(self, i: int, delay_ms: float = 0.0, loss_percent: float = 0.0) -> None:
    r"""Adds ``delay_ms`` one-way delay and ``loss_percent`` loss to what
    host ``i`` sends (``tc netem``); raises RuntimeError without netem."""
    done = self[i].run(
      ['tc', 'qdisc', 'replace', 'dev', 'eth0', 'root', 'netem',
       'delay', f'{delay_ms}ms', 'loss', f'{loss_percent}%']
    )  # fmt: skip
    if done.returncode != 0:
      raise RuntimeError(f'tc netem on {self[i].namespace}: {done.stderr.strip()}')

  def close(self) -> None:
    r"""Stops the userspace switch; removes the namespaces (their veths,
    TAP devices and the bridge go with them)."""
    if self._switch_process is not None:
      self._switch_process.kill()
      self._switch_process.wait()
      self._switch_process = None
    for name in reversed(self._made):
      _ip('netns', 'del', name, check=False)
    self._made.clear()


def netem_unavailable_reason() -> Optional[str]:
  r"""Why ``HostNetwork.impair`` cannot work here, or None when it can."""
  if unavailable_reason() is not None:
    return unavailable_reason()
  if shutil.which('tc') is None:
    return "iproute2's tc is missing"
  with HostNetwork(1, tag=f'netem{os.getpid()}') as net:
    try:
      net.impair(0, delay_ms=1)
    except RuntimeError as e:
      return f'this kernel cannot emulate delay and loss ({e})'
  return None


def impaired_network(
  num_hosts: int, delay_ms: float, loss_percent: float, tag: Optional[str] = None
) -> Tuple[HostNetwork, str]:
  r"""Hosts joined by a link of ``delay_ms`` one-way delay and
  ``loss_percent`` loss: ``tc netem`` where the kernel has it, else the
  userspace switch; returns the network and which of the two it is."""
  if netem_unavailable_reason() is None:
    net = HostNetwork(num_hosts, tag)
    try:
      for i in range(num_hosts):
        net.impair(i, delay_ms, loss_percent)  # on what host i sends: one direction each
    except BaseException:
      net.close()
      raise
    return net, 'tc netem'
  return HostNetwork(num_hosts, tag, emulated_link=(delay_ms, loss_percent)), 'userspace switch'
