"""benchmarks/memory.py tells a job's processes that started an interpreter
of their own from those forked from their parent."""

import multiprocessing
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'benchmarks'))
from memory import fresh_interpreters, tree_pids  # noqa: E402


def _wait(ready, stop) -> None:
  ready.send(True)
  stop.poll(60)


def _start(method: str):
  r"""A process started by ``method`` once it runs (a spawned one has its
  own command line only once it runs), and the pipe that stops it."""
  ctx = multiprocessing.get_context(method)
  ready_reader, ready_writer = ctx.Pipe(duplex=False)
  stop_reader, stop_writer = ctx.Pipe(duplex=False)
  proc = ctx.Process(target=_wait, args=(ready_writer, stop_reader), daemon=True)
  proc.start()
  assert ready_reader.poll(60), f'the {method} process did not start'
  return proc, stop_writer


def test_a_spawned_process_is_fresh_and_a_forked_one_is_not():
  started = [_start('spawn'), _start('fork')]
  try:
    (spawned, _), (forked, _) = started
    assert fresh_interpreters([spawned.pid]) == 1
    assert fresh_interpreters([forked.pid]) == 0
    assert {spawned.pid, forked.pid} <= set(tree_pids())
  finally:
    for proc, stop in started:
      stop.send(True)
      proc.join(30)
      if proc.is_alive():
        proc.kill()
        proc.join(30)


def test_processes_already_gone_are_not_counted():
  proc, stop = _start('spawn')
  stop.send(True)
  proc.join(30)
  assert fresh_interpreters([proc.pid]) == 0
