"""The tests' reader of a child's output (output_lines.py): every wait ends
by its deadline, also when the child wrote part of a line and hung."""

import subprocess
import sys
import time

import pytest
from output_lines import OutputLines

# Spawned processes: left out of make test-fast.
pytestmark = pytest.mark.slow


def child(code: str) -> subprocess.Popen:
  return subprocess.Popen(
    [sys.executable, '-c', code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
  )


@pytest.fixture
def reaped():
  procs = []
  yield procs.append
  for p in procs:
    p.kill()
    p.wait(timeout=30)


def test_a_partial_line_does_not_hold_the_wait(reaped):
  proc = child(
    "import sys, time; print('one'); sys.stdout.write('par'); sys.stdout.flush(); time.sleep(60)"
  )
  reaped(proc)
  lines = OutputLines(proc.stdout)
  assert lines.until(lambda line: line == 'one\n', 30) == 'one\n'
  began = time.monotonic()
  with pytest.raises(AssertionError, match='nothing more within 0.5 s before two'):
    lines.until(lambda line: line.startswith('two'), 0.5, what='two')
  with pytest.raises(AssertionError, match='went on past 0.5 s'):
    lines.rest(0.5)
  assert time.monotonic() - began < 10


def test_lines_until_one_then_the_rest_to_the_end(reaped):
  proc = child("print('a'); print('b'); print('c'); print('d')")
  reaped(proc)
  lines = OutputLines(proc.stdout)
  assert lines.first_line(30) == 'a\n'
  assert lines.until(lambda line: line == 'c\n', 30) == 'b\nc\n'
  assert lines.rest(30) == 'd\n'
  assert lines.first_line(1) == ''  # the end
  with pytest.raises(AssertionError, match='the output ended before the line'):
    lines.until(lambda line: True, 1)
  assert lines.seen == ['a\n', 'b\n', 'c\n', 'd\n']
