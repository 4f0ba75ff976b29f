"""A userspace Ethernet switch with delay and loss, for kernels without netem.

  python userspace_switch.py DELAY_MS LOSS_PERCENT NAMESPACE [NAMESPACE ...]

Opens the TAP device ``eth0`` of each network namespace (made beforehand
with ``ip -n NS tuntap add dev eth0 mode tap``), prints READY, and forwards
frames between them as a learning switch: each frame is dropped with
probability LOSS_PERCENT / 100, else delivered DELAY_MS after it was read
(one-way delay). Runs until killed. Frames keep their order per link.
"""

import collections
import ctypes
import fcntl
import os
import random
import select
import struct
import sys
import time

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000
BROADCAST_BIT = 0x01


def open_tap(namespace: str, name: str = 'eth0') -> int:
  r"""An fd of TAP device ``name`` of ``namespace`` (entered for the call)."""
  libc = ctypes.CDLL(None, use_errno=True)
  home = os.open('/proc/self/ns/net', os.O_RDONLY)
  target = os.open(f'/var/run/netns/{namespace}', os.O_RDONLY)
  try:
    if libc.setns(target, CLONE_NEWNET) != 0:
      raise OSError(ctypes.get_errno(), f'setns into {namespace}')
    fd = os.open('/dev/net/tun', os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack('16sH', name.encode(), IFF_TAP | IFF_NO_PI))
  finally:
    libc.setns(home, CLONE_NEWNET)
    os.close(home)
    os.close(target)
  return fd


def run(delay_s: float, loss: float, namespaces) -> None:
  taps = [open_tap(ns) for ns in namespaces]
  where = {}  # MAC -> the tap it was last seen on
  due = collections.deque()  # (deliver at, tap fds, frame); delays are equal: FIFO
  print('READY', flush=True)
  while True:
    timeout = max(due[0][0] - time.monotonic(), 0) if due else None
    readable, _, _ = select.select(taps, [], [], timeout)
    now = time.monotonic()
    for fd in readable:
      while True:
        try:
          frame = os.read(fd, 65536)
        except BlockingIOError:
          break
        where[frame[6:12]] = fd
        if loss and random.random() < loss:
          continue
        dst = frame[0:6]
        out = [where[dst]] if dst in where and not dst[0] & BROADCAST_BIT else taps
        due.append((now + delay_s, [t for t in out if t != fd], frame))
    now = time.monotonic()
    while due and due[0][0] <= now:
      _, outs, frame = due.popleft()
      for out in outs:
        try:
          os.write(out, frame)
        except OSError:  # the host's link is down, or its queue full: lost
          pass


if __name__ == '__main__':
  run(float(sys.argv[1]) / 1000, float(sys.argv[2]) / 100, sys.argv[3:])
