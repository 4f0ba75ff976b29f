"""Shared fixtures: small random graphs, the path of the real datasets, and
the reaping of process sessions."""

import logging
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import List

import numpy as np
import pytest
import torch

SHARED_DATASETS = Path(
  os.environ.get('GLT_SHARED_DATASETS', Path(__file__).resolve().parents[2] / 'shared' / 'datasets')
)


def pytest_configure(config):
  r"""Gives the processes the tests start a temporary directory of their
  own (TMPDIR), removed when the session ends: PyG's message-passing layers
  write a generated module to the temporary directory in each process that
  builds one, and never remove it. This process keeps its own (where its
  multiprocessing helpers clean up after the session); pytest_unconfigure
  removes the modules PyG wrote there."""
  tempfile.gettempdir()  # this process's, before TMPDIR moves
  config.session_tmpdir = tempfile.mkdtemp(prefix='glt-test-')
  os.environ['TMPDIR'] = config.session_tmpdir


def pytest_unconfigure(config):
  generated = [
    getattr(module, '__file__', None) or ''
    for name, module in list(sys.modules.items())
    if name.startswith('torch_geometric.')
  ]
  # PyG writes them at the top of the temporary directory; a PyG installed
  # under it (a checkout in /tmp) is not one of them
  here = tempfile.gettempdir()
  for path in generated:
    if os.path.dirname(path) == here:
      Path(path).unlink(missing_ok=True)
  try:
    shutil.rmtree(config.session_tmpdir)
  except OSError as error:  # a process the session left behind still writing there
    logging.getLogger(__name__).warning('could not remove %s: %s', config.session_tmpdir, error)


class Said(logging.Handler):
  r"""Keeps the messages logged through it."""

  def __init__(self):
    super().__init__(logging.INFO)
    self.messages: List[str] = []

  def emit(self, record: logging.LogRecord) -> None:
    self.messages.append(record.getMessage())


def said_by_the_library() -> Said:
  r"""What this library logs at INFO from now on (in a spawned process)."""
  said = Said()
  library = logging.getLogger('graphlearn_torch')
  library.setLevel(logging.INFO)
  library.addHandler(said)
  return said


def random_edges(num_src: int, num_dst: int, num_edges: int, seed: int) -> torch.Tensor:
  """A random COO edge_index (duplicates and self-loops allowed)."""
  rng = np.random.default_rng(seed)
  src = rng.integers(0, num_src, num_edges)
  dst = rng.integers(0, num_dst, num_edges)
  return torch.from_numpy(np.stack([src, dst])).long()


def kill_sessions(procs) -> None:
  r"""Kills the whole session of each process (started with
  ``start_new_session=True``), also where its leader has exited but left
  children, and reaps the leader."""
  for p in procs:
    try:
      os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:  # the session is gone already
      pass
    p.wait()


@pytest.fixture
def thread_count():
  """Restores torch's thread count after a test changes it."""
  n = torch.get_num_threads()
  yield
  torch.set_num_threads(n)


@pytest.fixture(params=[1, 2, 4])
def torch_threads(request, thread_count):
  """Runs a test at 1, 2 and 4 torch threads; the value is the count."""
  torch.set_num_threads(request.param)
  return request.param


@pytest.fixture(scope='session')
def cora_root() -> Path:
  root = SHARED_DATASETS / 'planetoid'
  if not (root / 'ind.cora.graph').exists():
    pytest.skip(f'Cora is not at {root}')
  return root


@pytest.fixture(scope='module')
def harness():
  """The host harness (the CUDA kernels' bodies, compiled for the CPU by
  kernel_harness.py), on 4 threads."""
  from kernel_harness import load_harness

  h = load_harness()
  h.set_num_threads(4)
  return h


@pytest.fixture(params=[1, 4], ids=['serial', '4-threads'])
def threads(request, harness):
  """The host harness's thread count for a test: serial, then 4 threads."""
  harness.set_num_threads(request.param)
  yield request.param
  harness.set_num_threads(4)
