"""utils.launched: work finished once by result(), or dropped by discard()."""

import pytest

from graphlearn_torch.utils.launched import Launched


def test_result_finishes_the_work_once():
  calls = []
  launched = Launched(lambda: calls.append(1) or len(calls))
  assert calls == []  # nothing until asked
  assert launched.result() == 1
  with pytest.raises(RuntimeError, match='finished or discarded already'):
    launched.result()
  assert calls == [1]


def test_then_runs_after_the_work_and_discard_drops_it():
  dropped = []
  launched = Launched(lambda: 20, lambda: dropped.append('work'))
  assert launched.then(lambda v: v + 1).result() == 21
  launched = Launched(lambda: 20, lambda: dropped.append('work'))
  chained = launched.then(lambda v: v + 1)
  chained.discard()
  chained.discard()  # once
  assert dropped == ['work']
  with pytest.raises(RuntimeError, match='finished or discarded already'):
    chained.result()
  finished = Launched(lambda: 1, lambda: dropped.append('late'))
  finished.result()
  finished.discard()  # nothing left to drop
  assert dropped == ['work']


def test_done_and_failed_work():
  assert Launched.done(5).result() == 5
  with pytest.raises(KeyError, match='gone'):
    Launched.failed(KeyError('gone')).then(lambda v: v).result()
