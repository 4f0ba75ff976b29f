"""``LogSetup``: an owner's logging set up again in the processes it starts.

A forked process inherits its parent's logging. One spawned, or forked from
a fork server (as sampling processes are where a GPU or an RPC agent is
about), starts with none configured, so what this library logs there below
WARNING (how a sampler's batches are drawn, say) went nowhere even where the
trainer's script logs at INFO."""

import logging
import pickle
from dataclasses import dataclass
from typing import Optional

LIBRARY_LOGGER = 'graphlearn_torch'


@dataclass(frozen=True)
class LogSetup:
  r"""How a process logs: its root logger's level, its first handler's
  level and formatter (None where it has no handler, or where the formatter
  does not pickle: then the default format), and this library's logger's
  level.

  Args:
    root_level: the root logger's level.
    handler_level: the level of the root's first handler (None: no handler).
    formatter: that handler's formatter (None: the default).
    library_level: this library's logger's own level (NOTSET: the root's).
  """

  root_level: int
  handler_level: Optional[int]
  formatter: Optional[logging.Formatter]
  library_level: int

  @classmethod
  def of_this_process(cls) -> 'LogSetup':
    r"""This process's setup, to hand to a process it starts."""
    root = logging.getLogger()
    handler = root.handlers[0] if root.handlers else None
    formatter = handler.formatter if handler is not None else None
    if formatter is not None and not picklable(formatter):
      formatter = None  # a custom one that cannot travel: the default format
    return cls(
      root_level=root.level,
      handler_level=handler.level if handler is not None else None,
      formatter=formatter,
      library_level=logging.getLogger(LIBRARY_LOGGER).level,
    )

  def apply(self) -> None:
    r"""Sets this process up so, where its root logger has no handler yet
    (a forked process keeps what it inherited): a stream handler to stderr
    with the owner's level and formatter."""
    root = logging.getLogger()
    if self.handler_level is not None and not root.handlers:
      handler = logging.StreamHandler()
      handler.setLevel(self.handler_level)
      handler.setFormatter(self.formatter or logging.Formatter(logging.BASIC_FORMAT))
      root.addHandler(handler)
      root.setLevel(self.root_level)
    logging.getLogger(LIBRARY_LOGGER).setLevel(self.library_level)


def picklable(obj: object) -> bool:
  r"""Whether ``obj`` pickles."""
  try:
    pickle.dumps(obj)
  except (pickle.PicklingError, TypeError, AttributeError):
    return False
  return True
