"""Channel throughput: ShmChannel vs torch.multiprocessing.Queue vs MpChannel.

  python benchmarks/bench_channel.py [--sizes 1MB 32MB] [--gb 4] [--gpu 0]

One producer process sends messages shaped like sampled batches (node ids,
edge rows and columns, a float feature block: four tensors); the consumer (this
process) receives them and reads one value per 4 KiB page of every tensor, as a
trainer that uses the batch would. The producer builds every message anew
(fresh tensors, filled), as a sampler does, so no channel can profit from
sending the same storage twice; that work is measured alone too ("producer
alone"), as the ceiling. Throughput is over a fixed number of messages after
a warm-up, from the consumer's side.

With --gpu, the messages are made on that GPU and the consumer takes them
there, as a trainer fed by sampling processes on its GPU: ShmChannel through
the consumer's GPU mirror (share_cuda_tensors: one buffer of the consumer's
that the producer opens once), ShmChannel through its pinned host memory
(GLT_CHANNEL_CUDA_IPC=0; the consumer copies each message to the GPU) and
torch.multiprocessing.Queue (every tensor sent as a CUDA IPC handle of its
own, which the consumer opens).

Producers run with MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ set, so that glibc keeps freed
buffers for reuse: without it, glibc sometimes hands every 32 MB buffer back to
the kernel and page-faults it in again, which doubles the producer's work at
random (seen as 60 instead of 120 messages/s in one run out of three).
"""

import argparse
import multiprocessing
import os
import queue as queue_module
import time
from typing import Optional

import torch
from results import Results, Table, add_results_argument

from graphlearn_torch.channel import MpChannel, ShmChannel
from graphlearn_torch.utils import parse_size

SPAWN = multiprocessing.get_context('spawn')
WARMUP = 5
GPU_NOTE = (
  ' On the GPU: the messages are made there and taken there; through pinned host memory the '
  'consumer copies each to the GPU; torch.multiprocessing.Queue sends each tensor as a CUDA '
  "IPC handle of its own; the GPU mirror is one buffer of the consumer's that the producer "
  'opened once.'
)


def make_message(nbytes: int, seq: int, device: Optional[torch.device] = None) -> dict:
  r"""A batch-shaped message of about ``nbytes`` bytes in four tensors."""
  nodes = max(1, nbytes // 10 // 8)
  edges = max(1, nbytes // 5 // 16)
  feat = max(1, (nbytes - nodes * 8 - edges * 16) // 4 // 100)
  return {
    'node': torch.empty(nodes, dtype=torch.int64, device=device).fill_(seq),
    'row': torch.empty(edges, dtype=torch.int64, device=device).fill_(seq),
    'col': torch.empty(edges, dtype=torch.int64, device=device).fill_(seq),
    'x': torch.empty(feat, 100, dtype=torch.float32, device=device).fill_(seq),
  }


def message_bytes(msg: dict) -> int:
  return sum(t.numel() * t.element_size() for t in msg.values())


def touch(msg: dict) -> float:
  r"""Reads one element per 4 KiB page of each tensor."""
  total = 0.0
  for t in msg.values():
    flat = t.view(-1)
    total += float(flat[:: max(1, 4096 // t.element_size())].sum())
  return total


def produce(channel, kind: str, nbytes: int, count: int, done, device=None):
  torch.set_num_threads(1)
  if device is not None:
    torch.cuda.set_device(device)
    if kind == 'shm, pinned':
      channel.pin_memory()
  for seq in range(count):
    msg = make_message(nbytes, seq, device)
    if kind == 'queue':
      channel.put(msg)
    else:
      channel.send(msg)
    if device is not None:
      torch.cuda.synchronize(device)  # what the consumer opens is written
  done.wait(600)  # a torch queue's tensors are fetched from this process


def make_channel(kind: str, nbytes: int, device: Optional[torch.device]):
  r"""The channel ``kind`` for messages of ``nbytes`` (a few at once)."""
  slots = max(4, min(16, (512 << 20) // max(nbytes, 1)))
  if kind == 'mp':
    return MpChannel(capacity=slots)
  if kind == 'queue':
    return SPAWN.Queue(maxsize=slots)
  channel = ShmChannel(capacity=slots, shm_size=max(64 << 20, slots * (nbytes + (1 << 20))))
  if kind == 'shm, GPU mirror' and not channel.share_cuda_tensors(device):
    raise RuntimeError('ShmChannel.share_cuda_tensors did not set a GPU mirror')
  if kind == 'shm, pinned' and not channel.pin_memory():
    raise RuntimeError('ShmChannel.pin_memory did not pin the channel')
  return channel


def measure(kind: str, nbytes: int, count: int, device: Optional[torch.device] = None) -> float:
  r"""Seconds for the consumer to receive ``count`` messages after warm-up
  (on ``device``, where given)."""
  channel = make_channel(kind, nbytes, device)
  done = SPAWN.Event()
  producer = SPAWN.Process(
    target=produce, args=(channel, kind, nbytes, WARMUP + count, done, device)
  )
  producer.start()
  try:

    def recv():
      if kind == 'queue':
        try:
          return channel.get(timeout=120)
        except queue_module.Empty:
          raise TimeoutError('the producer sent nothing for 120 s') from None
      msg = channel.recv(timeout_ms=120_000)
      if device is not None and kind == 'shm, pinned':  # to the GPU, as a trainer takes it
        msg = {key: value.to(device, non_blocking=True) for key, value in msg.items()}
      return msg

    for _ in range(WARMUP):
      touch(recv())
    start = time.perf_counter()
    for _ in range(count):
      touch(recv())
    elapsed = time.perf_counter() - start
  finally:
    done.set()
    producer.join(60)
    if producer.is_alive():
      producer.kill()
      producer.join()
  return elapsed


def producer_alone(nbytes: int, count: int, device: Optional[torch.device] = None) -> float:
  torch.set_num_threads(1)
  for seq in range(WARMUP):
    make_message(nbytes, seq, device)
  start = time.perf_counter()
  for seq in range(count):
    make_message(nbytes, seq, device)
    if device is not None:
      torch.cuda.synchronize(device)
  return time.perf_counter() - start


def in_process(fn, *args):
  r"""``fn(*args)`` in a fresh spawned process, as the producers run."""
  with SPAWN.Pool(1) as pool:
    return pool.apply(fn, args)


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--sizes', nargs='+', default=['1MB', '32MB'])
  p.add_argument('--gb', type=float, default=4.0, help='GB sent per size and channel')
  p.add_argument('--gpu', type=int, help='messages made and received on this GPU')
  add_results_argument(p)
  args = p.parse_args()
  results = Results('bench_channel' + ('_gpu' if args.gpu is not None else ''), args)
  device = torch.device('cuda', args.gpu) if args.gpu is not None else None
  kinds = {
    'torch.multiprocessing.Queue': 'queue',
    'MpChannel': 'mp',
    'ShmChannel': 'shm',
  }
  if device is not None:
    kinds = {
      'torch.multiprocessing.Queue, CUDA IPC a tensor': 'queue',
      'ShmChannel, pinned host memory': 'shm, pinned',
      "ShmChannel, the consumer's GPU mirror": 'shm, GPU mirror',
    }
  torch.set_num_threads(1)  # the consumer, like the producer, uses one thread
  if device is not None:
    torch.cuda.set_device(device)
  os.environ.setdefault('MALLOC_MMAP_THRESHOLD_', str(1 << 30))  # for the producers
  os.environ.setdefault('MALLOC_TRIM_THRESHOLD_', str(4 << 30))

  rows = []
  for size in args.sizes:
    nbytes = parse_size(size)
    actual = message_bytes(make_message(nbytes, 0))
    count = max(20, int(args.gb * (1 << 30) / actual))
    seconds_of = {'producer alone': in_process(producer_alone, nbytes, count, device)}
    for name, kind in kinds.items():
      seconds_of[name] = measure(kind, nbytes, count, device)
    base = seconds_of[next(iter(kinds))]
    for name, seconds in seconds_of.items():
      rows.append(
        [f'{name}, {size}', actual * count / seconds / 1e9, count / seconds, base / seconds]
      )

  where = f', on GPU {args.gpu}' if device is not None else ''
  gpu_note = GPU_NOTE if device is not None else ''
  table = results.add(
    Table(
      'channel',
      f'Batch-shaped messages from one producer process to the consumer{where}, 1 thread each',
      ['channel, message size', 'GB/s', 'messages/s', 'vs mp.Queue'],
      rows,
      chart={'label': 'channel, message size', 'value': 'GB/s'},
      note='The producer builds every message anew (four tensors: node ids, edge rows and '
      'columns, a float feature block); the consumer reads one value per 4 KiB page. '
      '"producer alone" is the ceiling: building the messages without sending them.' + gpu_note,
    )
  )
  print(table.render())
  results.write()


if __name__ == '__main__':
  main()
