"""ShmChannel's device mirror (DeviceMirror): a message's tensors on the
mirror's type of device are written into the consumer's buffer at the
places the channel gives them, and received as copies of the consumer's own.
On the CPU a mirror in host memory, in one process (the code of a GPU mirror
but for the device): content, the channel's bytes reused, the refusals; on
a GPU, producers in processes of their own writing into the consumer's GPU
buffer."""

import os
import pickle
import re
from pathlib import Path

import pytest
import torch
from test_channel import JOIN_S, assert_message_equal, expected_message, procs, start  # noqa: F401

from graphlearn_torch.channel import DeferredTensor, DeviceMirror, ShmChannel
from graphlearn_torch.channel.shm_channel import CUDA_IPC_ENV
from graphlearn_torch.utils.cuda_share import CudaIpcTensor

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a GPU')


def host_mirrored(capacity: int, shm_size: str) -> ShmChannel:
  channel = ShmChannel(capacity=capacity, shm_size=shm_size)
  channel.mirror(DeviceMirror.allocate(channel.mapping_size, torch.device('cpu')))
  return channel


def mixed_message(seq: int) -> dict:
  r"""expected_message and the entries a mirror must keep apart: one not
  contiguous, an empty one, a deferred one (written by the channel)."""
  msg = expected_message(seq % 3, seq)
  msg['strided'] = torch.arange(600, dtype=torch.int16).view(20, 30).t() + seq
  msg['empty'] = torch.empty(0, 4)
  return msg


def deferred(seq: int) -> DeferredTensor:
  return DeferredTensor((3, 2), torch.int64, lambda out: out.fill_(seq))


def test_mirrored_messages_arrive_whole_while_the_channel_reuses_its_bytes():
  channel = host_mirrored(capacity=3, shm_size='128KB')
  kept = []
  for seq in range(40):
    channel.send({**mixed_message(seq), 'deferred': deferred(seq)}, timeout_ms=1000)
    if seq % 2:  # two in flight at a time: the channel hands their bytes on
      for sent in (seq - 1, seq):
        got = channel.recv(timeout_ms=1000)
        assert torch.equal(got.pop('deferred'), torch.full((3, 2), sent))
        assert_message_equal(got, mixed_message(sent))
        if sent % 10 == 0:
          kept.append((sent, got))
  # The mirrored entries received are the consumer's own: later messages,
  # written where they were, left them as they were, and they hold none of
  # the channel's bytes.
  for sent, got in kept:
    assert_message_equal(got, mixed_message(sent))
  assert channel.stats()['used_bytes'] == 0


def test_a_mirrored_entry_received_is_a_copy():
  channel = ShmChannel(capacity=2, shm_size='64KB')
  mirror = DeviceMirror.allocate(channel.mapping_size, torch.device('cpu'))
  channel.mirror(mirror)
  channel.send({'x': torch.arange(1000)}, timeout_ms=1000)
  got = channel.recv(timeout_ms=1000)
  assert int(mirror.memory.count_nonzero()) > 0  # it went through the mirror
  mirror.memory.zero_()
  assert torch.equal(got['x'], torch.arange(1000))


def memory_behind(channel: ShmChannel) -> int:
  r"""Bytes of memory behind the channel's segment, by the kernel's count
  of its pages (header, slots and map included)."""
  return os.fstat(channel.host_handle()[2]).st_blocks * 512


def shmem_on_huge_pages() -> bool:
  r"""Whether the kernel may back shared memory with 2 MB pages (its count
  of a segment's pages is then in those)."""
  path = Path('/sys/kernel/mm/transparent_hugepage/shmem_enabled')
  chosen = re.search(r'\[(\w+)\]', path.read_text()) if path.exists() else None
  return chosen is not None and chosen.group(1) in ('always', 'within_size', 'force')


def assert_backed_before_written(channel: ShmChannel) -> None:
  r"""The kernel counts as many bytes behind the segment as the channel
  backed: it wrote no page it had not backed first."""
  backed = header_bytes(channel) + channel.stats()['backed_bytes']
  if not shmem_on_huge_pages():
    assert memory_behind(channel) == backed


def header_bytes(channel: ShmChannel) -> int:
  r"""The segment's bytes before its data ring and the ring's first page,
  backed from the start."""
  return channel.mapping_size - channel.shm_size


def test_mirrored_bytes_take_no_memory_in_the_channel():
  # Messages of 4-5 MB in the mirror and 48 bytes written into the channel,
  # three in flight through a 64 MB channel: its memory backs the pages the
  # blocks' headers and host entries lie on, not the 15 MB they span.
  channel = host_mirrored(capacity=8, shm_size='64MB')
  held = []
  for seq in range(60):
    rows = 1 << 17 | 4096 * (seq % 7)
    channel.send({'x': torch.full((rows, 8), seq), 'deferred': deferred(seq)}, timeout_ms=1000)
    held.append((seq, rows, channel.recv(timeout_ms=1000)))
    if len(held) > 3:
      held.pop(0)
  for seq, rows, got in held:
    assert torch.equal(got['x'], torch.full((rows, 8), seq))
    assert torch.equal(got['deferred'], torch.full((3, 2), seq))
  stats = channel.stats()
  assert stats['used_bytes'] > 12 << 20  # the messages held span this much of it
  assert stats['backed_bytes'] <= 64 * 4096, stats
  assert_backed_before_written(channel)


def test_host_messages_over_mirrored_ones_get_memory_first():
  # Host messages laid over the holes mirrored ones left: each page is
  # backed before it is written (the kernel's count of the segment's pages
  # equals the channel's), and every message arrives whole.
  channel = host_mirrored(capacity=8, shm_size='16MB')
  plain = DeferredTensor((1 << 17,), torch.int64, lambda out: out.copy_(torch.arange(1 << 17)))
  for seq in range(30):
    if seq % 3 == 2:
      channel.send({'host': plain}, timeout_ms=1000)
      got = channel.recv(timeout_ms=1000)
      assert torch.equal(got['host'], torch.arange(1 << 17))
    else:
      rows = 1 << 16 | 512 * seq
      channel.send({'x': torch.full((rows, 8), seq), 'd': deferred(seq)}, timeout_ms=1000)
      got = channel.recv(timeout_ms=1000)
      assert torch.equal(got['x'], torch.full((rows, 8), seq))
    del got
    assert_backed_before_written(channel)
  stats = channel.stats()
  assert stats['backed_bytes'] < 4 << 20, stats  # a host message's 1 MB and pages of headers


def test_the_mirror_must_cover_the_channel():
  channel = ShmChannel(capacity=2, shm_size='64KB')
  with pytest.raises(ValueError, match='smaller than the channel'):
    channel.mirror(DeviceMirror.allocate(channel.shm_size, torch.device('cpu')))
  mirror = DeviceMirror.allocate(64, torch.device('cpu'))
  with pytest.raises(ValueError, match='outside the mirror of 64 bytes'):
    mirror.place(32, torch.empty(5, dtype=torch.int64))


def test_a_host_mirror_does_not_leave_its_process():
  channel = host_mirrored(capacity=2, shm_size='64KB')
  with pytest.raises(ValueError, match='only GPU memory'):
    pickle.dumps(channel)


def test_a_mirrored_message_needs_the_mirror_to_be_received():
  channel = host_mirrored(capacity=2, shm_size='64KB')
  plain = ShmChannel.open_host_handle(channel.host_handle())
  channel.send({'x': torch.arange(4)}, timeout_ms=1000)
  with pytest.raises(RuntimeError, match="device mirror \\('x'\\)"):
    plain.recv(timeout_ms=1000)


def unopenable():
  raise RuntimeError('invalid device context')


def test_a_mirror_that_cannot_be_opened_says_so():
  mirror = DeviceMirror(CudaIpcTensor(None, (unopenable, ())))
  assert mirror.device_type == 'cuda'  # known without opening it
  with pytest.raises(RuntimeError, match='GPU mirror of this channel could not be opened'):
    mirror.write([(0, torch.arange(3))])


def test_cuda_tensors_go_through_the_channel_where_there_is_no_mirror(monkeypatch):
  monkeypatch.setenv(CUDA_IPC_ENV, '0')
  channel = ShmChannel(capacity=2, shm_size='64KB')
  assert not channel.share_cuda_tensors() and not channel.shares_cuda_tensors
  monkeypatch.delenv(CUDA_IPC_ENV)
  assert channel.share_cuda_tensors() == torch.cuda.is_available()
  assert channel.shares_cuda_tensors == torch.cuda.is_available()


def produce_on_gpu(channel, producer: int, count: int):
  channel.send({'shares': torch.tensor([channel.shares_cuda_tensors])})
  base = torch.arange(400_000, dtype=torch.float32, device='cuda').view(4000, 100)
  for seq in range(count):
    channel.send(
      {
        'x': base * seq + producer,
        'edges': base[:, :2].t().long(),  # not contiguous
        'empty': torch.empty(0, 3, device='cuda'),
        'seq': torch.tensor([seq]),
        'producer': torch.tensor([producer]),
      }
    )


@needs_gpu
@pytest.mark.slow
def test_producers_write_cuda_tensors_into_the_consumers_gpu_mirror(procs):  # noqa: F811
  r"""Two producers' CUDA tensors reach the consumer on its GPU through its
  mirror (3 messages of 1.7 MB fit the channel at once), each received as a
  copy of the consumer's own: whole, and still there after the producers
  exited and later messages took their places."""
  channel = ShmChannel(capacity=3, shm_size='6MB')
  assert channel.share_cuda_tensors(torch.device('cuda', 0))
  producers = [start(procs, produce_on_gpu, channel, p, 6) for p in range(2)]
  base = torch.arange(400_000, dtype=torch.float32, device='cuda').view(4000, 100)
  got = [channel.recv(timeout_ms=60_000) for _ in range(14)]
  for p in producers:
    p.join(JOIN_S)
    assert p.exitcode == 0
  assert sum('shares' in msg for msg in got) == 2
  assert all(bool(msg['shares']) for msg in got if 'shares' in msg)
  batches = [msg for msg in got if 'shares' not in msg]
  for msg in batches:
    seq, producer = int(msg['seq']), int(msg['producer'])
    assert msg['x'].device == torch.device('cuda', 0) and not msg['seq'].is_cuda
    assert torch.equal(msg['x'], base * seq + producer)
    assert torch.equal(msg['edges'], base[:, :2].t().long())
    assert msg['empty'].is_cuda and msg['empty'].shape == (0, 3)
  assert sorted((int(m['producer']), int(m['seq'])) for m in batches) == [
    (p, s) for p in range(2) for s in range(6)
  ]
