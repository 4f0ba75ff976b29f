"""What a request to a peer and its answer send: a tensor that views part
of a larger buffer (a hop's seeds of one partition, split from the
others') goes alone, not with the rest of its buffer, which TensorPipe
sends whole where the view spans more than half of it. The RPC test's
processes are spawned on loopback and reaped also on failure."""

import collections
import traceback

import pytest
import torch
from event_pipes import EventPipes
from test_dist_sampling import free_port
from test_job_identity import reap, start

import graphlearn_torch as glt
from graphlearn_torch.distributed.runtime import rpc as rpc_module
from graphlearn_torch.distributed.runtime.context import worker_name
from graphlearn_torch.distributed.runtime.payload import sent_alone

RPC_TIMEOUT_S = 20


def test_a_view_of_part_of_a_buffer_is_copied_out_and_others_go_as_they_are():
  buffer = torch.arange(1000)
  piece = torch.split(buffer, [600, 400])[0]
  strided = buffer[::2]
  Pair = collections.namedtuple('Pair', 'a b')
  fresh = torch.arange(5)
  sent = sent_alone((piece, [strided, fresh], {'x': Pair(piece, 3)}, 'text'))
  assert torch.equal(sent[0], piece) and sent[0].untyped_storage().nbytes() == 600 * 8
  assert torch.equal(sent[1][0], strided) and sent[1][0].untyped_storage().nbytes() == 500 * 8
  assert sent[1][1] is fresh  # its buffer is its own
  assert isinstance(sent[2]['x'], Pair) and sent[2]['x'].b == 3
  assert sent[2]['x'].a.untyped_storage().nbytes() == 600 * 8
  assert sent[3] == 'text'
  assert sent_alone(buffer) is buffer
  # containers with nothing to copy out are the same objects, of their types
  counts = collections.defaultdict(int, a=1)
  same = (torch.Size([2, 3]), counts, [fresh])
  assert sent_alone(same) is same
  copied = sent_alone(collections.defaultdict(int, a=piece))
  assert isinstance(copied, collections.defaultdict) and copied['b'] == 0


class BytesReceived(rpc_module.RpcCalleeBase):
  r"""The bytes of the buffer behind each tensor a request brought, and a
  view of 60% of a buffer of 100,000 ids."""

  def call(self, *tensors, **named):
    sizes = [t.untyped_storage().nbytes() for t in (*tensors, *named.values())]
    return sizes, torch.arange(100_000)[:60_000]


def member(rank, port, events):
  dist = glt.distributed
  try:
    dist.init_worker_group(2, rank, 'requests')
    dist.init_rpc('127.0.0.1', port, num_rpc_threads=2, rpc_timeout=RPC_TIMEOUT_S)
    callee = rpc_module.rpc_register(BytesReceived())
    rpc_module.barrier(timeout=RPC_TIMEOUT_S)  # both registered
    if rank == 0:
      seeds = torch.arange(100_000)
      piece = torch.split(seeds, [60_000, 40_000])[0]
      peer = rpc_module.rpc_request_async(
        worker_name('requests', 1), callee, (piece,), {'rest': seeds[60_000:]}
      )
      sizes, answer = peer.wait()
      events.put(('received', rank, (sizes, answer.untyped_storage().nbytes())))
    rpc_module.barrier(timeout=RPC_TIMEOUT_S)  # rank 1 serves until rank 0 has its answer
    dist.shutdown_rpc(graceful=True, timeout=RPC_TIMEOUT_S)
    events.put(('out', rank, None))
  except Exception:
    events.put(('error', rank, traceback.format_exc()))


@pytest.mark.slow
def test_a_request_and_its_answer_send_a_piece_of_a_buffer_alone():
  port, events = free_port(), EventPipes()
  procs = [start(member, r, port, events.writer()) for r in (0, 1)]
  try:
    sizes, answered = events.wait('received', 0, failures=('error',))
    assert sizes == [60_000 * 8, 40_000 * 8]  # not the 100,000 ids' 800 kB
    assert answered == 60_000 * 8
    for r in (0, 1):
      events.wait('out', r, failures=('error',))
  finally:
    reap(procs)
