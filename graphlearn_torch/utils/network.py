"""Which local interface reaches a peer, for the transports that must be told.

TensorPipe (RPC) and gloo (DDP) advertise the address of the machine's
hostname unless ``TP_SOCKET_IFNAME`` / ``GLOO_SOCKET_IFNAME`` name an
interface. Where the hostname maps to a loopback address (Debian's
``127.0.1.1`` line in /etc/hosts, containers) peers on other machines are
told to connect to 127.0.x.x and fail. The interface whose address this
machine uses to reach the job's master is the one the peers can reach.
"""

import fcntl
import logging
import os
import socket
import struct
from typing import Optional

logger = logging.getLogger(__name__)

_SIOCGIFADDR = 0x8915
SOCKET_IFNAME_VARIABLES = ('TP_SOCKET_IFNAME', 'GLOO_SOCKET_IFNAME')


def source_address(peer: str) -> str:
  r"""The local IPv4 address the kernel would send from to reach ``peer``
  (no packet is sent).

  Args:
    peer: an IPv4 address or host name.
  """
  with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    s.connect((peer, 9))  # a UDP "connect" only chooses the route
    return s.getsockname()[0]


def _interface_address(name: str) -> Optional[str]:
  with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    try:
      packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack('256s', name.encode()[:15]))
    except OSError:  # no IPv4 address
      return None
  return socket.inet_ntoa(packed[20:24])


def interface_for(peer: str) -> Optional[str]:
  r"""The name of the local interface whose (first IPv4) address this
  machine uses to reach ``peer``, or None when there is none such (no
  route, or the route's source address is not an interface's first).

  Args:
    peer: an IPv4 address or host name (the job's master address).
  """
  try:
    source = source_address(peer)
  except OSError:
    return None
  for _, name in socket.if_nameindex():
    if _interface_address(name) == source:
      return name
  return None


def default_socket_ifname(master_addr: str, variables=SOCKET_IFNAME_VARIABLES) -> Optional[str]:
  r"""Sets the unset ones of ``variables`` (``TP_SOCKET_IFNAME``,
  ``GLOO_SOCKET_IFNAME``) to the interface that reaches ``master_addr``,
  so that the transports advertise an address the peers can reach; returns
  that interface (None, and nothing set, when it cannot be told). Values the
  user set are kept. Call it before the RPC agent or process group starts.

  Args:
    master_addr: the job's master address.
    variables: the environment variables to set.
  """
  unset = [v for v in variables if not os.environ.get(v)]
  if not unset:
    return None
  name = interface_for(master_addr)
  if name is None:
    return None
  for variable in unset:
    os.environ[variable] = name
  logger.debug('%s=%s (the interface that reaches %s)', '/'.join(unset), name, master_addr)
  return name


def advertised_address() -> str:
  r"""The address TensorPipe advertises to peers: that of the interface
  ``TP_SOCKET_IFNAME`` names, else of the hostname."""
  name = os.environ.get('TP_SOCKET_IFNAME')
  address = _interface_address(name) if name else None
  if address is None:
    try:
      address = socket.gethostbyname(socket.gethostname())
    except OSError:
      address = socket.gethostname()
  return address
