"""Work started now whose result the caller asks for later, on its own thread.

A GPU batch is launched, then finished: between the two the GPU draws it and
the host is free (a loader collates the batch before). ``Launched`` holds
what finishes such work and what drops it unfinished.
"""

from typing import Callable, Generic, Optional, TypeVar

T = TypeVar('T')
U = TypeVar('U')


def _nothing() -> None:
  pass


class Launched(Generic[T]):
  """Work launched: ``result()`` finishes it (once) and gives its result, or
  raises what it raised; ``discard()`` drops it unfinished.

  Args:
    finish: waits for the work and gives its result.
    discard: drops the work unfinished.
  """

  def __init__(self, finish: Callable[[], T], discard: Callable[[], None] = _nothing):
    self._finish: Optional[Callable[[], T]] = finish
    self._discard = discard

  @classmethod
  def done(cls, value: T) -> 'Launched[T]':
    """Work done already, whose result is ``value``."""
    return cls(lambda: value)

  @classmethod
  def failed(cls, error: BaseException) -> 'Launched':
    """Work that failed at its launch: ``result()`` raises ``error``."""

    def finish():
      raise error

    return cls(finish)

  def then(self, fn: Callable[[T], U]) -> 'Launched[U]':
    """The work followed by ``fn`` of its result (run by ``result()``)."""
    return Launched(lambda: fn(self.result()), self.discard)

  def result(self) -> T:
    """Waits for the work and gives its result (once)."""
    if self._finish is None:
      raise RuntimeError('this launched work was finished or discarded already')
    finish, self._finish = self._finish, None
    return finish()

  def discard(self) -> None:
    """Drops the work if it was not finished."""
    if self._finish is not None:
      self._finish = None
      self._discard()
