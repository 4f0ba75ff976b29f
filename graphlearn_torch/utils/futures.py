"""Futures whose errors keep their type.

``torch.futures.Future.then`` wraps an exception its callback raises in a
RuntimeError ("Got the following error when running the callback: ..."),
so a ValueError naming a bad id reaches ``wait()`` as a RuntimeError.
``then`` here hands the callback's own exception on instead.
"""

from typing import Callable

import torch


def completed(value) -> torch.futures.Future:
  r"""A future that already holds ``value``."""
  done = torch.futures.Future()
  done.set_result(value)
  return done


def then(fut: torch.futures.Future, callback: Callable[[torch.futures.Future], object]):
  r"""A future of ``callback(fut)`` once ``fut`` is done, as
  ``fut.then(callback)``, failing with the exception ``callback`` raises,
  of its own type.

  Args:
    fut: the future to wait for.
    callback: called with ``fut`` once it is done.
  """
  out = torch.futures.Future()

  def settle(done: torch.futures.Future) -> None:
    try:
      value = callback(done)
    except Exception as e:  # handed to whoever waits on out
      out.set_exception(e)
      return
    out.set_result(value)

  fut.add_done_callback(settle)
  return out
