"""utils.futures: a callback's error reaches wait() with its own type."""

import pytest
import torch

from graphlearn_torch.utils.futures import completed, then


def test_then_hands_on_the_callback_value():
  pending = torch.futures.Future()
  out = then(pending, lambda done: done.value() + 1)
  assert not out.done()
  pending.set_result(41)
  assert out.wait() == 42


def test_then_keeps_the_callback_error_type():
  def check(done):
    raise ValueError(f'id {done.value()} is out of range')

  with pytest.raises(ValueError, match='^id 40 is out of range$'):
    then(completed(40), check).wait()


def test_then_hands_on_the_awaited_future_error():
  failed = torch.futures.Future()
  failed.set_exception(KeyError('gone'))
  with pytest.raises(KeyError, match='gone'):
    then(failed, lambda done: done.value()).wait()
