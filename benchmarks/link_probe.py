"""A link's round trip and throughput, measured between two hosts with a
TCP echo (bench_multihost.py's "round trip" and "link, MB/s" columns)."""

import subprocess
import sys
import time

PORT = 29507
PROBE_BYTES = 64 << 20  # sent one way to measure a link's throughput

# the client: 200 round trips of a byte (the median, ms), then PROBE_BYTES
# one way until the server's byte says they arrived (MB/s)
PING = """
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
times = []
for _ in range(200):
  t = time.perf_counter(); c.sendall(b'x'); c.recv(1); times.append(time.perf_counter() - t)
chunk, t = bytes(1 << 20), time.perf_counter()
for _ in range(int(sys.argv[3]) >> 20):
  c.sendall(chunk)
c.recv(1)
print(sorted(times)[100] * 1000, int(sys.argv[3]) / (time.perf_counter() - t) / 1e6)
"""

ECHO = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(); c, _ = s.accept()
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for _ in range(200):
  c.sendall(c.recv(1))
left = int(sys.argv[3])
while left > 0:
  left -= len(c.recv(min(left, 1 << 20)))
c.sendall(b'x')
"""


def probe_link(server_prefix, client_prefix, address) -> tuple:
  r"""``(round trip ms, MB/s one way)`` of the link from ``client_prefix``'s
  host to ``address`` on ``server_prefix``'s."""
  port, size = str(PORT), str(PROBE_BYTES)
  echo = subprocess.Popen([*server_prefix, sys.executable, '-c', ECHO, address, port, size])
  try:
    for _ in range(50):
      ping = subprocess.run(
        [*client_prefix, sys.executable, '-c', PING, address, port, size],
        capture_output=True, text=True, timeout=120,
      )  # fmt: skip
      if ping.returncode == 0:
        rtt, throughput = map(float, ping.stdout.split())
        return rtt, throughput
      time.sleep(0.1)  # the echo server is not listening yet
    raise RuntimeError(f'no round trip to {address}: {ping.stderr[-500:]}')
  finally:
    echo.kill()
    echo.wait()
