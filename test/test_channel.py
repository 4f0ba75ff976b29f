"""ShmChannel and MpChannel: order, content, sizes, timeouts, dead peers and
leftovers. Producers are spawned processes; every one is reaped, also when a
test fails."""

import gc
import multiprocessing
import os
import pickle
import threading
import time

import pytest
import torch

from graphlearn_torch.channel import (
  DeferredTensor,
  MpChannel,
  QueueTimeoutError,
  ShmChannel,
)

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context('spawn')
JOIN_S = 60


def expected_message(producer: int, seq: int) -> dict:
  r"""The message producer `producer` sends as its `seq`-th: sizes vary with
  both, and the content says who sent it and when."""
  tag = producer * 100_000 + seq
  n = (seq * 7919 + producer * 104_729) % 3000
  return {
    'producer': torch.tensor([producer]),
    'seq': torch.tensor([seq]),
    'ids': torch.arange(n) + tag,
    'feat': torch.full((n % 97, 5), float(tag), dtype=torch.float32),
    'mask': torch.arange(n % 13) % 2 == 0,
    'scalar': torch.tensor(float(tag), dtype=torch.float64),
  }


def assert_message_equal(got: dict, want: dict):
  assert list(got) == list(want)
  for key, value in want.items():
    assert got[key].dtype == value.dtype, key
    assert torch.equal(got[key], value), key


def produce(channel, producer: int, count: int, delay_s: float = 0.0, all_sent=None):
  for seq in range(count):
    channel.send(expected_message(producer, seq))
    if delay_s:
      time.sleep(delay_s)
  if all_sent is not None:
    # The channel knows the producers that have sent: one that sent all and
    # exited before another's first send would leave it none alive.
    all_sent.wait(JOIN_S)


def produce_sizes(channel, sizes):
  for nbytes in sizes:
    channel.send(sized_message(nbytes))


def sized_message(nbytes: int) -> dict:
  r"""A message of about `nbytes` bytes of tensor data, in three tensors."""
  n = nbytes // 8
  return {
    'a': torch.arange(n // 2, dtype=torch.int64),
    'b': torch.arange(n - n // 2, dtype=torch.float64).flip(0),
    'c': torch.tensor([nbytes], dtype=torch.int64),
  }


def strided_payload() -> torch.Tensor:
  return torch.arange(4096 * 4096, dtype=torch.int32).view(4096, 4096).t()


@pytest.fixture
def procs():
  r"""Processes a test starts; all are killed and reaped at the end."""
  started = []
  yield started
  for p in started:
    if p.is_alive():
      p.kill()
    p.join(JOIN_S)


def start(procs, target, *args, daemon=True):
  p = SPAWN.Process(target=target, args=args, daemon=daemon)
  p.start()
  procs.append(p)
  return p


def our_mappings() -> int:
  with open('/proc/self/maps') as f:
    return sum('glt-shm-channel' in line for line in f)


def dev_shm() -> set:
  return set(os.listdir('/dev/shm')) if os.path.isdir('/dev/shm') else set()


@pytest.fixture(scope='module', autouse=True)
def no_leftovers():
  r"""After this module, /dev/shm holds nothing new and this process maps no
  channel segment."""
  before = dev_shm()
  yield
  gc.collect()
  assert dev_shm() - before == set()
  assert our_mappings() == 0


@pytest.mark.parametrize('num_producers', [1, 4])
def test_order_and_content(procs, num_producers):
  channel = ShmChannel(capacity=16, shm_size='2MB')
  count = 150
  all_sent = SPAWN.Barrier(num_producers)
  for p in range(num_producers):
    start(procs, produce, channel, p, count, 0.0, all_sent)
  next_seq = [0] * num_producers
  for _ in range(num_producers * count):
    msg = channel.recv(timeout_ms=30_000)
    p, seq = int(msg['producer']), int(msg['seq'])
    assert seq == next_seq[p], "each producer's messages arrive in the order sent"
    next_seq[p] += 1
    assert_message_equal(msg, expected_message(p, seq))
  assert next_seq == [count] * num_producers
  for p in procs:
    p.join(JOIN_S)
    assert p.exitcode == 0
  assert channel.empty()


def test_sizes_from_zero_to_200mb(procs):
  channel = ShmChannel(capacity=4, shm_size='256MB')
  sizes = [0, 8, 1000, 1 << 20, 50 << 20, 200 << 20, 16]
  start(procs, produce_sizes, channel, sizes)
  for nbytes in sizes:
    msg = channel.recv(timeout_ms=60_000)
    assert int(msg['c']) == nbytes
    assert_message_equal(msg, sized_message(nbytes))
    del msg
  procs[0].join(JOIN_S)
  assert procs[0].exitcode == 0

  channel.send({})  # no tensors at all
  assert channel.recv(timeout_ms=1000) == {}
  empty = {'e': torch.empty(0, 3), 'z': torch.zeros(())}
  channel.send(empty)
  assert_message_equal(channel.recv(timeout_ms=1000), empty)


def test_received_tensors_view_the_channel_and_free_it():
  channel = ShmChannel(capacity=4, shm_size='1MB')
  free = channel.stats()['free_bytes']
  channel.send({'x': torch.arange(1000), 'y': torch.ones(10, 10)})
  msg = channel.recv(timeout_ms=1000)
  lo = channel._queue.mapping_address
  hi = lo + channel._queue.mapping_size
  assert all(lo <= t.data_ptr() < hi for t in msg.values()), 'no copy out of the channel'
  assert channel.stats()['free_bytes'] < free
  x = msg.pop('x')
  assert channel.stats()['free_bytes'] < free, 'x still holds the block'
  del msg
  assert channel.stats()['free_bytes'] < free
  del x
  assert channel.stats()['free_bytes'] == free


def test_non_contiguous_and_dtypes_round_trip():
  channel = ShmChannel(capacity=8, shm_size='4MB')
  msg = {
    't': torch.arange(60).view(6, 10).t(),
    'h': torch.randn(5, 3).half(),
    'b': torch.randn(4).bfloat16(),
    'u': torch.arange(7, dtype=torch.uint8),
    'c': torch.randn(3, dtype=torch.complex64),
    's': torch.arange(30)[::3],
  }
  channel.send(msg)
  got = channel.recv(timeout_ms=1000)
  assert_message_equal(got, msg)
  assert all(t.is_contiguous() for t in got.values())


def test_large_tensors_round_trip_whatever_their_length_and_alignment():
  # tensors of 1 MiB and more are copied with streaming stores, 64 bytes at
  # a time: a tail that is not a multiple of 64 and a source that is not
  # aligned (a contiguous view at an odd offset) must arrive intact
  channel = ShmChannel(capacity=8, shm_size='16MB')
  g = torch.Generator().manual_seed(5)
  base = torch.randint(0, 256, ((1 << 20) + 101,), dtype=torch.uint8, generator=g)
  msg = {
    'odd_length': base[: (1 << 20) + 37],
    'unaligned': base[3:],
    'rows': torch.randn(3001, 33, generator=g),
    'just_below': torch.arange((1 << 20) - 1, dtype=torch.uint8),
    'just_at': torch.arange(1 << 20, dtype=torch.uint8),
  }
  assert msg['unaligned'].is_contiguous() and msg['unaligned'].data_ptr() % 64 != 0
  channel.send(msg)
  got = channel.recv(timeout_ms=1000)
  assert_message_equal(got, msg)


def test_deferred_entries_are_written_in_place():
  # A DeferredTensor entry is written straight into the message's bytes in
  # the channel; one whose write fails leaves no block behind, and the
  # channel goes on.
  channel = ShmChannel(capacity=4, shm_size='4MB')
  free = channel.stats()['free_bytes']
  rows = torch.randn(300, 7)
  places = []

  def write(out):
    places.append(out.data_ptr())
    out.copy_(rows)

  msg = {'ids': torch.arange(300), 'x': DeferredTensor((300, 7), torch.float32, write)}
  channel.send(msg)
  got = channel.recv(timeout_ms=1000)
  assert list(got) == ['ids', 'x']
  assert torch.equal(got['ids'], torch.arange(300)) and torch.equal(got['x'], rows)
  assert places == [got['x'].data_ptr()], 'written where the consumer reads it'
  assert torch.equal(DeferredTensor((300, 7), torch.float32, write).materialize(), rows)
  del got

  def fail(out):
    raise KeyError('no rows today')

  with pytest.raises(KeyError, match='no rows today'):
    channel.send({'ids': torch.arange(3), 'x': DeferredTensor((3, 7), torch.float32, fail)})
  stats = channel.stats()
  assert stats['pending'] == 0 and stats['queued'] == 0 and stats['free_bytes'] == free
  channel.send({'x': DeferredTensor((2, 7), torch.float32, lambda out: out.fill_(1.5))})
  assert torch.equal(channel.recv(timeout_ms=1000)['x'], torch.full((2, 7), 1.5))
  with pytest.raises(TypeError, match="entry 'x' must be a tensor"):
    MpChannel().send({'x': DeferredTensor((1,), torch.float32, lambda out: None)})


def test_reservation_checks_its_use():
  channel = ShmChannel(capacity=2, shm_size='64KB')
  keys, templates = ['a'], [torch.empty(4, 2, device='meta')]
  status, _, reservation = channel._queue.reserve(keys, templates, 1000)
  assert status == 0 and reservation.views[0].shape == (4, 2)
  with pytest.raises(ValueError, match=r'reserved as Float of shape \[4, 2\], got Long'):
    reservation.write(0, torch.zeros(4, 2, dtype=torch.int64))
  with pytest.raises(ValueError, match='entry 1 is out of range'):
    reservation.write(1, torch.zeros(4, 2))
  reservation.write(0, torch.ones(4, 2))
  reservation.commit()
  with pytest.raises(RuntimeError, match='already committed or aborted'):
    reservation.commit()
  assert torch.equal(channel.recv(timeout_ms=1000)['a'], torch.ones(4, 2))
  # a reservation dropped unfinished frees its block
  free = channel.stats()['free_bytes']
  _, _, reservation = channel._queue.reserve(keys, templates, 1000)
  assert channel.stats()['pending'] == 1
  del reservation
  gc.collect()
  assert channel.stats()['pending'] == 0 and channel.stats()['free_bytes'] == free


def test_message_larger_than_shm_size():
  channel = ShmChannel(capacity=4, shm_size='1MB')
  with pytest.raises(ValueError, match='does not fit in this channel.s shm_size'):
    channel.send({'x': torch.zeros(1 << 18), 'y': torch.zeros(1)})
  assert channel.empty() and channel.stats()['pending'] == 0
  channel.send({'x': torch.zeros(1000)})  # still usable
  assert channel.recv(timeout_ms=1000)['x'].numel() == 1000


def test_bad_input():
  channel = ShmChannel(capacity=2, shm_size='64KB')
  with pytest.raises(TypeError, match="entry 'x' must be a tensor"):
    channel.send({'x': [1, 2]})
  with pytest.raises(TypeError, match='dict of str to tensors'):
    channel.send(torch.zeros(1))
  with pytest.raises(ValueError, match='only dense tensors'):
    channel.send({'s': torch.eye(3).to_sparse()})
  with pytest.raises(ValueError, match='timeout_ms'):
    channel.recv(timeout_ms=-5)
  with pytest.raises(ValueError, match='capacity'):
    ShmChannel(capacity=0)
  with pytest.raises(ValueError, match='256MB'):
    ShmChannel(shm_size='lots')
  assert channel.stats()['pending'] == 0 and channel.empty()


@pytest.mark.parametrize('timeout_ms', [100, 1000])
def test_recv_timeout_is_accurate(timeout_ms):
  channel = ShmChannel(capacity=2, shm_size='64KB')
  begin = time.monotonic()
  with pytest.raises(QueueTimeoutError, match='no message'):
    channel.recv(timeout_ms=timeout_ms)
  elapsed_ms = (time.monotonic() - begin) * 1000
  assert timeout_ms <= elapsed_ms <= 1.1 * timeout_ms


def test_send_timeout_when_full():
  channel = ShmChannel(capacity=2, shm_size='64KB')
  channel.send({'x': torch.zeros(1)})
  channel.send({'x': torch.zeros(1)})
  begin = time.monotonic()
  with pytest.raises(QueueTimeoutError, match='2 of 2 messages queued'):
    channel.send({'x': torch.zeros(1)}, timeout_ms=300)
  assert 300 <= (time.monotonic() - begin) * 1000 <= 330
  held = channel.recv(timeout_ms=100)  # a slot is free again; bytes suffice
  channel.send({'x': torch.zeros(1)}, timeout_ms=100)
  del held
  # Bytes: a message alive in the consumer keeps its bytes from producers.
  channel = ShmChannel(capacity=8, shm_size='64KB')
  channel.send({'x': torch.zeros(10_000)})
  held = channel.recv(timeout_ms=100)
  with pytest.raises(QueueTimeoutError, match='bytes free'):
    channel.send({'x': torch.zeros(10_000)}, timeout_ms=100)
  del held
  channel.send({'x': torch.zeros(10_000)}, timeout_ms=100)


def poll_until(condition, timeout_s: float = 10.0) -> bool:
  r"""Whether ``condition()`` became true within ``timeout_s``."""
  deadline = time.monotonic() + timeout_s
  while not condition():
    if time.monotonic() > deadline:
      return False
    time.sleep(0.005)
  return True


def test_producers_waiting_for_room_are_counted():
  # A producer waits while a message the consumer holds takes the bytes:
  # counted until it gets room or gives up, whichever way it leaves.
  channel = ShmChannel(capacity=8, shm_size='64KB')
  channel.send({'x': torch.zeros(10_000)})
  held = channel.recv(timeout_ms=100)
  assert channel.waiting_for_room == 0
  sender = threading.Thread(target=channel.send, args=({'x': torch.ones(10_000)},))
  sender.start()
  try:
    assert poll_until(lambda: channel.waiting_for_room == 1), 'the producer is not counted'
    assert channel.stats()['waiting_for_room'] == 1
  finally:
    del held
    sender.join(10)
  assert not sender.is_alive() and channel.waiting_for_room == 0
  assert torch.equal(channel.recv(timeout_ms=100)['x'], torch.ones(10_000))
  channel.send({'x': torch.zeros(10_000)})
  held = channel.recv(timeout_ms=100)
  with pytest.raises(QueueTimeoutError):
    channel.send({'x': torch.zeros(10_000)}, timeout_ms=100)
  assert channel.waiting_for_room == 0, 'a producer that gave up is still counted'
  del held


def test_ring_wraps_around_with_messages_held():
  channel = ShmChannel(capacity=64, shm_size='128KB')
  sent = 0
  held = []
  for round_ in range(200):
    nbytes = 800 * (1 + round_ % 17)
    channel.send(sized_message(nbytes), timeout_ms=100)
    sent += 1
    held.append((nbytes, channel.recv(timeout_ms=100)))
    if len(held) > 3:  # release out of order: the second oldest first
      nbytes_, msg = held.pop(1)
      assert_message_equal(msg, sized_message(nbytes_))
  for nbytes_, msg in held:
    assert_message_equal(msg, sized_message(nbytes_))
  del held, msg
  assert channel.stats()['used_bytes'] == 0


def test_memory_backed_stays_near_the_bytes_in_flight():
  # Two messages of ~1 MB in flight at a time through a 64 MB channel: the
  # allocation reuses the front of the region, so memory backs a few MB of
  # it (three messages and some slack), not all 64 (each newly backed byte
  # is a page fault and zeroing in every process that touches it).
  channel = ShmChannel(capacity=64, shm_size='64MB')
  nbytes = 1 << 20
  held = []
  for i in range(200):
    channel.send(sized_message(nbytes + 4096 * (i % 5)), timeout_ms=1000)
    held.append(channel.recv(timeout_ms=1000))
    if len(held) > 2:
      held.pop(0)
  del held
  stats = channel.stats()
  assert stats['used_bytes'] == 0
  assert stats['backed_bytes'] <= 6 * nbytes, stats  # next-fit: all 64 MB


def test_memory_is_looked_up_only_for_a_message_that_needs_more(monkeypatch):
  # Reading what memory is left takes 0.1-0.2 ms: a message laid where the
  # channel's memory backs it already sends without.
  from graphlearn_torch.channel import shm_channel

  asked = []
  monkeypatch.setattr(shm_channel, '_check_room_for', asked.append)
  channel = ShmChannel(capacity=8, shm_size='16MB')
  for nbytes in (1 << 20, 1 << 20, 1 << 20, 3 << 20):
    channel.send(sized_message(nbytes), timeout_ms=1000)
    assert_message_equal(channel.recv(timeout_ms=1000), sized_message(nbytes))
  # the first message, then the larger one, each for the pages it newly took
  # (the channel backs its first page when made)
  backed = channel.stats()['backed_bytes'] - os.sysconf('SC_PAGESIZE')
  assert len(asked) == 2 and asked[0] >= 1 << 20 and sum(asked) == backed, (asked, backed)


def test_pickle_outside_spawning_uses_a_passed_descriptor():
  channel = ShmChannel(capacity=4, shm_size='64KB')
  same = pickle.loads(pickle.dumps(channel))  # through multiprocessing's resource sharer
  same.send({'x': torch.arange(3)})
  assert torch.equal(channel.recv(timeout_ms=1000)['x'], torch.arange(3))
  del same


def test_pin_memory_without_cuda_is_a_warning(caplog):
  if torch.cuda.is_available():
    pytest.skip('CUDA is available; the GPU tests cover pinning')
  channel = ShmChannel(capacity=2, shm_size='64KB')
  assert channel.pin_memory() is False
  assert 'CUDA is not available' in caplog.text


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a GPU')
@pytest.mark.parametrize('pinned', [False, True], ids=['unpinned', 'pinned'])
def test_cuda_tensors_are_copied_in_after_their_kernels(pinned):
  """A message's CUDA tensors copy into the channel behind the kernels that
  make them (into pinned memory, asynchronously: the channel waits for the
  copies once before it queues the message), beside host tensors and
  non-contiguous ones."""
  channel = ShmChannel(capacity=4, shm_size='64MB')
  if pinned:
    assert channel.pin_memory()
  x = torch.randn(4000, 100, device='cuda')
  edges = torch.arange(8000, device='cuda').view(2, 4000).t()  # not contiguous
  for _ in range(3):
    msg = {'x': x * 2 + 1, 'edges': edges, 'host': torch.arange(5), 'y': x[:, 0] > 0}
    channel.send(msg, timeout_ms=1000)
    got = channel.recv(timeout_ms=1000)
    for key, value in msg.items():
      assert torch.equal(got[key], value.cpu()), key


def mp_produce(channel, count, done):
  for seq in range(count):
    channel.send(expected_message(0, seq))
  done.wait(JOIN_S)  # torch shares each tensor through this process: it must outlive the recv


def test_mp_channel(procs):
  channel = MpChannel(capacity=4)
  done = SPAWN.Event()
  start(procs, mp_produce, channel, 20, done)
  for seq in range(20):
    assert_message_equal(channel.recv(timeout_ms=30_000), expected_message(0, seq))
  with pytest.raises(QueueTimeoutError):
    channel.recv(timeout_ms=100)
  done.set()
  procs[0].join(JOIN_S)
  assert procs[0].exitcode == 0
  assert MpChannel(maxsize=2)._queue._maxsize == 2
