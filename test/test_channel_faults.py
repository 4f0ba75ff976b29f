"""ShmChannel's crash safety: a producer killed mid-write, producers that all
exited, a consumer that died under a waiting producer. Producers are spawned
processes; every one is reaped, also when a test fails."""

import os
import signal
import time

import pytest
import test_channel
import torch
from event_pipes import EventPipes
from test_channel import (
  JOIN_S,
  SPAWN,
  assert_message_equal,
  expected_message,
  produce,
  start,
  strided_payload,
)

from graphlearn_torch.channel import ChannelClosedError, ShmChannel

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

# test_channel's fixtures: the processes a test starts, all reaped; nothing
# left in /dev/shm or mapped after the module.
procs = test_channel.procs
no_leftovers = test_channel.no_leftovers


def produce_forever_strided(channel):
  r"""Sends a large non-contiguous tensor forever, so most of its time is
  spent copying into the channel."""
  payload = strided_payload()
  seq = 0
  while True:
    channel.send({'x': payload, 'seq': torch.tensor([seq])})
    seq += 1


def own_channel_then_die(events, producer_events):
  r"""Makes a 1-slot channel, starts a producer on it, and kills itself
  (SIGKILL) once the producer waits for room."""
  channel = ShmChannel(capacity=1, shm_size='1MB')
  producer = SPAWN.Process(target=fill_channel, args=(channel, producer_events))
  producer.start()
  events.put(('producer_pid', 0, producer.pid))
  while channel.qsize() < 1:  # the producer's second message waits for room
    time.sleep(0.01)
  os.kill(os.getpid(), signal.SIGKILL)


def fill_channel(channel, events):
  channel.send({'x': torch.zeros(1)})
  start = time.monotonic()
  try:
    channel.send({'x': torch.ones(1)})
    events.put(('sent', 0, time.monotonic() - start))
  except ChannelClosedError as e:
    events.put(('closed', 0, (time.monotonic() - start, str(e))))


def test_sigkill_mid_write_leaves_the_channel_usable(procs):
  channel = ShmChannel(capacity=64, shm_size='160MB')
  victim = start(procs, produce_forever_strided, channel)
  for p in range(3):
    start(procs, produce, channel, p, 100, 0.002)
  payload = strided_payload()
  # Wait until the victim is inside a write (its 64 MB strided copy takes
  # tens of ms; the others' writes take microseconds), then kill it there.
  deadline = time.monotonic() + 60
  received = {p: 0 for p in range(3)}
  victim_seq = []
  writing_since = None
  while True:
    assert time.monotonic() < deadline, 'the victim never started a write'
    stats = channel.stats()
    if stats['pending'] == 0:
      writing_since = None
    elif writing_since is None:
      writing_since = time.monotonic()
    elif (
      victim_seq
      and min(received.values()) > 0  # every other producer has joined the channel
      and time.monotonic() - writing_since > 0.005
    ):
      os.kill(victim.pid, signal.SIGKILL)
      break
    msg = channel.recv(timeout_ms=100) if stats['queued'] else None
    if msg is not None:
      if 'x' in msg:
        victim_seq.append(int(msg['seq']))
      else:
        p = int(msg['producer'])
        assert int(msg['seq']) == received[p]
        received[p] += 1
  victim.join(JOIN_S)
  assert victim.exitcode == -signal.SIGKILL
  # The victim died holding a half-written block (pending a moment ago).
  # Another producer that finds no room reclaims it at once, so whether it
  # is still pending now is a race; that it was reclaimed is checked below.

  # The others go on; the consumer gets all of their messages, and the
  # victim's in order and whole.
  while min(received.values()) < 100:
    msg = channel.recv(timeout_ms=30_000)
    if 'x' in msg:
      victim_seq.append(int(msg['seq']))
      assert torch.equal(msg['x'], payload)
      continue
    p, seq = int(msg['producer']), int(msg['seq'])
    assert seq == received[p]
    assert_message_equal(msg, expected_message(p, seq))
    received[p] += 1
  assert victim_seq == list(range(len(victim_seq)))
  del msg

  # Every producer has exited: an empty channel says so instead of waiting.
  for p in procs:
    p.join(JOIN_S)
  while not channel.empty():
    channel.recv(timeout_ms=1000)
  begin = time.monotonic()
  with pytest.raises(ChannelClosedError, match='all 4 producer processes'):
    channel.recv(timeout_ms=30_000)
  assert time.monotonic() - begin < 1.0
  # The victim's half-written block was reclaimed: the whole ring is free.
  stats = channel.stats()
  assert stats['pending'] == 0 and stats['used_bytes'] == 0
  big = {'x': torch.zeros((160 << 20) // 4 - 64, dtype=torch.float32)}
  channel.send(big, timeout_ms=1000)
  assert channel.recv(timeout_ms=1000)['x'].numel() == big['x'].numel()


def test_consumer_sees_dead_producers(procs):
  channel = ShmChannel(capacity=8, shm_size='1MB')
  producer = start(procs, produce, channel, 0, 3)
  for seq in range(3):
    assert int(channel.recv(timeout_ms=30_000)['seq']) == seq
  producer.join(JOIN_S)
  begin = time.monotonic()
  with pytest.raises(ChannelClosedError, match='all 1 producer'):
    channel.recv()  # no timeout: the dead producer is what ends the wait
  assert time.monotonic() - begin < 1.0


def test_producer_sees_dead_owner(procs):
  events = EventPipes()
  owner = start(procs, own_channel_then_die, events.writer(), events.writer(), daemon=False)
  producer_pid = events.wait('producer_pid', timeout=JOIN_S)
  owner.join(JOIN_S)
  assert owner.exitcode == -signal.SIGKILL
  waited, message = events.wait('closed', timeout=JOIN_S, failures=('sent',))
  assert waited < 2.0 and 'has exited' in message
  deadline = time.monotonic() + JOIN_S
  while time.monotonic() < deadline:  # the orphaned producer exits by itself
    try:
      os.kill(producer_pid, 0)
    except ProcessLookupError:
      break
    time.sleep(0.05)
  else:
    os.kill(producer_pid, signal.SIGKILL)
    pytest.fail('the producer did not exit after its consumer died')
