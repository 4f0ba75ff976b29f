"""pickled_for_process: a payload pickled before its process starts, with the
shared tensors in it, reaches a forked process without multiprocessing's
resource-sharer thread (a process forked while that thread serves its first
request can hang for good), and one started otherwise as before."""

import multiprocessing
import os
import pickle
import threading

import pytest
import torch

from graphlearn_torch.utils.process_payload import pickled_for_process

JOIN_S = 60


def open_fds() -> set:
  return set(os.listdir('/proc/self/fd'))


def add_one(payload: bytes, results) -> None:
  r"""Rebuilds the payload's tensors, writes to them and reports their sums."""
  tensors = pickle.loads(payload)
  for t in tensors:
    t.add_(1)
  results.put([float(t.sum()) for t in tensors])


def run(start_method: str, tensors) -> list:
  r"""The child's sums, after it wrote to ``tensors`` (in shared memory)."""
  ctx = multiprocessing.get_context(start_method)
  results = ctx.SimpleQueue()
  with pickled_for_process(tensors, start_method) as payload:
    # a descriptor handed by the resource-sharer thread names its socket
    assert (b'listener-' in payload) == (start_method != 'fork')
    proc = ctx.Process(target=add_one, args=(payload, results), daemon=True)
    proc.start()
  try:
    proc.join(JOIN_S)
    assert proc.exitcode == 0, f'the child ended with {proc.exitcode}'
    return results.get()
  finally:
    if proc.is_alive():
      proc.kill()
    proc.join(5)


@pytest.mark.parametrize('start_method', ['fork', 'spawn'])
def test_a_payloads_shared_tensors_reach_the_process_and_are_shared(start_method):
  tensors = [torch.zeros(1000), torch.arange(10, dtype=torch.int16)]
  assert run(start_method, tensors) == [1000.0, 55.0]
  assert torch.equal(tensors[0], torch.ones(1000))  # written by the child
  assert torch.equal(tensors[1], torch.arange(1, 11, dtype=torch.int16))


def test_a_forked_process_gets_its_descriptors_without_a_thread_and_none_stay_open():
  tensors = [torch.zeros(10).share_memory_() for _ in range(3)]
  threads, fds = threading.active_count(), open_fds()
  assert run('fork', tensors) == [10.0] * 3
  assert threading.active_count() == threads  # no resource-sharer thread
  assert open_fds() == fds  # the duplicates held for the child are closed


def test_a_payload_that_fails_to_pickle_leaves_no_descriptor_open():
  class Unpicklable:
    def __reduce__(self):
      raise TypeError('not this one')

  tensors = [torch.zeros(10).share_memory_()]
  fds = open_fds()
  with pytest.raises(TypeError, match='not this one'):
    with pickled_for_process([*tensors, Unpicklable()], 'fork'):
      pass
  assert open_fds() == fds
