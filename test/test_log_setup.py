"""LogSetup: a process's logging set up again in a spawned process (as a
sampling process started from a fork server sets up its owner's)."""

import logging
import multiprocessing
import pickle

import pytest

from graphlearn_torch.utils.log_setup import LIBRARY_LOGGER, LogSetup

SPAWN = multiprocessing.get_context('spawn')


def child_logs(setup: LogSetup, out) -> None:
  r"""Applies ``setup`` and puts on ``out`` how an INFO line of this library
  comes out: None where the root logger would drop it."""
  setup.apply()
  root = logging.getLogger()
  record = logging.getLogger(f'{LIBRARY_LOGGER}.sampler').makeRecord(
    f'{LIBRARY_LOGGER}.sampler', logging.INFO, __file__, 1, 'batches on %s', ('cuda:0',), None
  )
  library = logging.getLogger(LIBRARY_LOGGER)
  shown = library.isEnabledFor(logging.INFO) and root.handlers
  out.put(root.handlers[0].format(record) if shown else None)


def spawned_logs(setup: LogSetup):
  out = SPAWN.Queue()
  proc = SPAWN.Process(target=child_logs, args=(setup, out))
  proc.start()
  try:
    return out.get(timeout=60)
  finally:
    proc.join(60)
    if proc.is_alive():
      proc.kill()


@pytest.fixture
def root_handler():
  r"""This process's root logger with one handler at INFO, restored after."""
  root = logging.getLogger()
  saved = root.handlers[:], root.level
  handler = logging.StreamHandler()
  handler.setFormatter(logging.Formatter('[%(levelname)s %(name)s] %(message)s'))
  root.handlers[:] = [handler]
  root.setLevel(logging.INFO)
  try:
    yield handler
  finally:
    root.handlers[:], level = saved
    root.setLevel(level)


def test_a_spawned_process_logs_as_its_owner(root_handler):
  line = spawned_logs(LogSetup.of_this_process())
  assert line == f'[INFO {LIBRARY_LOGGER}.sampler] batches on cuda:0'


def test_a_formatter_that_does_not_pickle_gives_the_default_format(root_handler):
  class Local(logging.Formatter):  # a local class does not pickle
    pass

  root_handler.setFormatter(Local('%(message)s'))
  setup = LogSetup.of_this_process()
  assert setup.formatter is None
  assert spawned_logs(setup) == f'INFO:{LIBRARY_LOGGER}.sampler:batches on cuda:0'


def test_an_owner_without_handlers_leaves_the_process_unconfigured():
  root = logging.getLogger()
  saved = root.handlers[:]
  root.handlers[:] = []
  try:
    setup = LogSetup.of_this_process()
  finally:
    root.handlers[:] = saved
  assert spawned_logs(setup) is None


class TaggedFormatter(logging.Formatter):
  r"""A formatter of a module the receiver may not have."""


def test_a_formatter_not_rebuilt_in_the_process_gives_the_default_format():
  default = f'INFO:{LIBRARY_LOGGER}.sampler:batches on cuda:0'
  record = logging.makeLogRecord(
    {'name': f'{LIBRARY_LOGGER}.sampler', 'levelname': 'INFO', 'msg': 'batches on cuda:0'}
  )
  pickled = pickle.dumps(TaggedFormatter('%(message)s'))
  missing = b'x' * len(__name__)  # a module of the same name's length: its class not importable
  elsewhere = pickled.replace(__name__.encode(), missing)
  for formatter in (b'not a pickle', elsewhere):
    setup = LogSetup(logging.INFO, logging.INFO, formatter, logging.NOTSET)
    assert setup.rebuilt_formatter().format(record) == default
  assert LogSetup(0, 0, pickled, 0).rebuilt_formatter().format(record) == 'batches on cuda:0'
