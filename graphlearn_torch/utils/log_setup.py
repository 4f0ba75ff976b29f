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
  level and formatter (pickled: None where it has no handler, or where the
  formatter does not pickle), and this library's logger's level.

  Args:
    root_level: the root logger's level.
    handler_level: the level of the root's first handler (None: no handler).
    formatter: that handler's formatter, pickled (None: the default).
    library_level: this library's logger's own level (NOTSET: the root's).
  """

  root_level: int
  handler_level: Optional[int]
  formatter: Optional[bytes]
  library_level: int

  @classmethod
  def of_this_process(cls) -> 'LogSetup':
    r"""This process's setup, to hand to a process it starts."""
    root = logging.getLogger()
    handler = root.handlers[0] if root.handlers else None
    formatter = handler.formatter if handler is not None else None
    return cls(
      root_level=root.level,
      handler_level=handler.level if handler is not None else None,
      formatter=pickled(formatter) if formatter is not None else None,
      library_level=logging.getLogger(LIBRARY_LOGGER).level,
    )

  def apply(self) -> None:
    r"""Sets this process up so, where its root logger has no handler yet
    (a forked process keeps what it inherited): a stream handler to stderr
    with the owner's level and formatter (the default format where that
    formatter cannot be rebuilt here)."""
    root = logging.getLogger()
    if self.handler_level is not None and not root.handlers:
      handler = logging.StreamHandler()
      handler.setLevel(self.handler_level)
      handler.setFormatter(self.rebuilt_formatter())
      root.addHandler(handler)
      root.setLevel(self.root_level)
    logging.getLogger(LIBRARY_LOGGER).setLevel(self.library_level)

  def rebuilt_formatter(self) -> logging.Formatter:
    r"""The owner's formatter, or the default one where it did not pickle or
    its class is not importable here (one of the owner's script, say)."""
    if self.formatter is not None:
      try:
        return pickle.loads(self.formatter)
      except (pickle.UnpicklingError, AttributeError, ImportError) as e:
        logging.getLogger(__name__).debug("the owner's log formatter is not rebuilt here: %s", e)
    return logging.Formatter(logging.BASIC_FORMAT)


def pickled(obj: object) -> Optional[bytes]:
  r"""``obj`` pickled, or None where it does not pickle."""
  try:
    return pickle.dumps(obj)
  except (pickle.PicklingError, TypeError, AttributeError):
    return None
