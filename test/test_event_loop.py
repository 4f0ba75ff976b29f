"""ConcurrentEventLoop: where callbacks run, when places free up, and a loop
started from several threads at once; torch futures awaited on a loop, and
a coroutine run on the calling thread."""

import asyncio
import concurrent.futures
import logging
import threading

import pytest
import torch

from graphlearn_torch.distributed import ConcurrentEventLoop
from graphlearn_torch.distributed.runtime.event_loop import (
  loop_runs_here,
  run_in_this_thread,
  wrap_torch_future,
)

WAIT_S = 10


async def value(x):
  return x


async def fail(message):
  raise ValueError(message)


@pytest.fixture
def loop():
  loop = ConcurrentEventLoop(1)
  yield loop
  loop.shutdown_loop(WAIT_S)


def test_a_callback_starts_the_next_task_at_concurrency_one(loop):
  # The server producer's pattern: each finished batch starts the next from
  # its callback. The place of the finished task is free by then.
  done = []

  def next_one(x):
    done.append(x)
    if x < 49:
      loop.add_task(value(x + 1), callback=next_one, timeout=WAIT_S)

  loop.add_task(value(0), callback=next_one, timeout=WAIT_S)
  assert loop.wait_all(WAIT_S)
  assert done == list(range(50))


def test_handlers_run_in_the_loop_thread(loop):
  # Also for tasks that finish before add_task returns.
  threads = []
  errors = []

  def add_many():
    for i in range(100):
      loop.add_task(value(i), callback=lambda _: threads.append(threading.current_thread().name))
    loop.add_task(
      fail('no'), on_error=lambda e: errors.append((threading.current_thread().name, str(e)))
    )

  adders = [threading.Thread(target=add_many) for _ in range(4)]
  for t in adders:
    t.start()
  for t in adders:
    t.join(WAIT_S)
  assert loop.wait_all(WAIT_S)
  assert threads == ['glt-event-loop'] * 400
  assert errors == [('glt-event-loop', 'no')] * 4


def test_one_loop_when_threads_start_it_at_once():
  loop = ConcurrentEventLoop(8)
  before = sum(t.name == 'glt-event-loop' for t in threading.enumerate())
  gate = threading.Barrier(8)
  results = []

  def add_one(i):
    gate.wait(WAIT_S)
    loop.add_task(value(i), callback=results.append, timeout=WAIT_S)

  adders = [threading.Thread(target=add_one, args=(i,)) for i in range(8)]
  try:
    for t in adders:
      t.start()
    for t in adders:
      t.join(WAIT_S)
    # A task scheduled on a loop that no thread runs would never finish.
    assert loop.wait_all(WAIT_S)
    assert sorted(results) == list(range(8))
    assert sum(t.name == 'glt-event-loop' for t in threading.enumerate()) == before + 1
  finally:
    loop.shutdown_loop(WAIT_S)


def test_wait_all_waits_for_the_callback(loop):
  release = threading.Event()
  loop.add_task(value(1), callback=lambda _: release.wait(WAIT_S))
  assert not loop.wait_all(0.2)
  release.set()
  assert loop.wait_all(WAIT_S)


def test_a_failing_handler_is_logged_and_the_loop_goes_on(loop, caplog):
  def broken(_):
    raise RuntimeError('handler broke')

  done = []
  with caplog.at_level(logging.ERROR, logger='graphlearn_torch.distributed.runtime.event_loop'):
    loop.add_task(value(1), callback=broken)
    loop.add_task(fail('task broke'), on_error=broken)
    loop.add_task(fail('unhandled'))
    loop.add_task(value(2), callback=done.append)
    assert loop.wait_all(WAIT_S)
  assert done == [2]
  text = '\n'.join(r.getMessage() + str(r.exc_info[1]) for r in caplog.records)
  assert text.count('handler broke') == 2 and 'unhandled' in text


def test_add_task_times_out_when_no_place_frees_up(loop):
  release = concurrent.futures.Future()

  async def blocked():
    await asyncio.wrap_future(release)

  loop.add_task(blocked())
  with pytest.raises(TimeoutError, match='no sampling task finished'):
    loop.add_task(value(1), timeout=0.2)
  release.set_result(None)
  assert loop.wait_all(WAIT_S)


def test_no_task_after_shutdown():
  # A producer's last add_task can race its shutdown: it must not start a
  # fresh loop that nobody stops.
  loop = ConcurrentEventLoop(1)
  loop.add_task(value(1))
  loop.shutdown_loop(WAIT_S)
  before = sum(t.name == 'glt-event-loop' for t in threading.enumerate())
  with pytest.raises(RuntimeError, match='shut down'):
    loop.add_task(value(2))
  with pytest.raises(RuntimeError, match='shut down'):
    loop.submit(value(3))
  assert sum(t.name == 'glt-event-loop' for t in threading.enumerate()) == before


def test_a_torch_future_awaited_whether_done_or_completed_later(loop):
  async def awaited(fut):
    return await wrap_torch_future(fut)

  ok, failed, later = (torch.futures.Future() for _ in range(3))
  ok.set_result(3)
  failed.set_exception(ValueError('bad rows'))
  assert loop.run_task(awaited(ok), WAIT_S) == 3
  with pytest.raises(ValueError, match='bad rows'):
    loop.run_task(awaited(failed), WAIT_S)
  pending = loop.submit(awaited(later))
  threading.Timer(0.05, later.set_result, (4,)).start()  # from another thread, as RPC does
  assert pending.result(WAIT_S) == 4


def test_a_coroutine_run_in_this_thread_returns_or_times_out():
  here = asyncio.new_event_loop()
  try:
    assert run_in_this_thread(here, value(5), WAIT_S) == 5
    with pytest.raises(TimeoutError, match='longer than 0.05 s'):
      run_in_this_thread(here, asyncio.sleep(10), 0.05)
    assert not loop_runs_here()
    assert asyncio.run(ran_where(loop_runs_here))
  finally:
    here.close()


async def ran_where(check):
  return check()
