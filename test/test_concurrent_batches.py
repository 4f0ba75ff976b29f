"""Loaders that sample several batches at once on the CPU
(``concurrent_batches``): the batches of a loader that samples one at a
time, in the same order, across epochs, a resumed state and a failing
batch; the batch threads run their kernels alone."""

import threading

import pytest
import torch
from conftest import random_edges

from graphlearn_torch._ext import ops
from graphlearn_torch.data import Dataset
from graphlearn_torch.loader import LinkNeighborLoader, NeighborLoader
from graphlearn_torch.sampler import NegativeSampling
from graphlearn_torch.utils.batch_threads import BatchThreads

HETERO_COUNTS = {'paper': 40, 'author': 30}
HETERO_EDGES = {
  ('author', 'writes', 'paper'): (30, 40, 160),
  ('paper', 'cites', 'paper'): (40, 40, 120),
}


def homo_dataset(n=80, e=600):
  torch.manual_seed(0)  # the same features in every loader's dataset
  ds = Dataset(edge_dir='in')
  ds.init_graph(random_edges(n, n, e, seed=5), graph_mode='CPU', num_nodes=n)
  ds.init_node_features(torch.randn(n, 6))
  ds.init_edge_features(torch.randn(e, 2))
  ds.init_node_labels(torch.randint(0, 4, (n,)))
  return ds


def hetero_dataset():
  edges = {
    et: random_edges(s, d, e, seed=i) for i, (et, (s, d, e)) in enumerate(HETERO_EDGES.items())
  }
  torch.manual_seed(0)
  ds = Dataset(edge_dir='in')
  ds.init_graph(edges, graph_mode='CPU', num_nodes=HETERO_COUNTS)
  ds.init_node_features({t: torch.randn(n, 3) for t, n in HETERO_COUNTS.items()})
  ds.init_node_labels({'paper': torch.arange(40) % 3})
  return ds


def node_loader(k, **kw):
  loader = NeighborLoader(
    homo_dataset(), [4, 3], torch.arange(80), batch_size=8, shuffle=True, with_edge=True,
    seed=7, device='cpu', concurrent_batches=k, **kw,
  )  # fmt: skip
  return loader, lambda b: (b.n_id, b.edge_index, b.e_id, b.x, b.edge_attr, b.y, b.input_id)


def hetero_loader(k):
  loader = NeighborLoader(
    hetero_dataset(), [3, 2], ('paper', torch.arange(40)), batch_size=6, shuffle=True, seed=7,
    device='cpu', concurrent_batches=k,
  )  # fmt: skip

  def fields(b):
    return [b[t][f] for t in sorted(b.node_types) for f in ('n_id', 'x')] + [
      b[et].edge_index for et in sorted(b.edge_types)
    ]

  return loader, fields


def link_loader(k):
  loader = LinkNeighborLoader(
    homo_dataset(), [3, 2], neg_sampling=NegativeSampling('binary', 1), batch_size=50,
    shuffle=True, seed=7, device='cpu', concurrent_batches=k,
  )  # fmt: skip
  return loader, lambda b: (b.n_id, b.edge_index, b.edge_label_index, b.edge_label)


def epochs_of(loader, fields, epochs=2, stop_after=3):
  r"""Each epoch's batches (``fields`` of each), the first epoch left after
  ``stop_after`` batches (its batches launched ahead dropped)."""
  out = []
  for epoch in range(epochs):
    batches = []
    for i, batch in enumerate(loader):
      batches.append([x.clone() for x in fields(batch)])
      if epoch == 0 and i + 1 == stop_after:
        break
    out.append(batches)
  return out


def assert_same_batches(got, want):
  assert len(got) == len(want) > 0
  for a, b in zip(got, want):
    assert len(a) == len(b)
    assert all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize('make', [node_loader, hetero_loader, link_loader])
def test_concurrent_batches_are_the_batches_of_one_at_a_time(make):
  runs = []
  for k in (1, 3):
    loader, fields = make(k)
    runs.append(epochs_of(loader, fields))
    loader.shutdown()
  for got, want in zip(*runs):
    assert_same_batches(got, want)


def test_a_resumed_loader_with_concurrent_batches_goes_on_as_one_at_a_time():
  reference, fields = node_loader(1)
  want = [[x.clone() for x in fields(b)] for b in reference]
  loader, _ = node_loader(3)
  it = iter(loader)
  first = [[x.clone() for x in fields(next(it))] for _ in range(4)]
  state = loader.state_dict()
  loader.shutdown()
  resumed, _ = node_loader(2)
  resumed.load_state_dict(state)
  rest = [[x.clone() for x in fields(b)] for b in resumed]
  resumed.shutdown()
  assert_same_batches(first + rest, want)


def test_a_failing_batch_fails_in_its_turn_and_the_others_go_on():
  loader, fields = node_loader(3)
  sample = loader._sample_batch

  def sample_or_fail(index, random):
    if index.numel() and int(index.min()) == 0:  # the batch of seed position 0
      raise ValueError('no rows for this batch')
    return sample(index, random)

  loader._sample_batch = sample_or_fail
  reference, _ = node_loader(1)
  want = [[x.clone() for x in fields(b)] for b in reference]
  failing = next(i for i, b in enumerate(want) if 0 in b[-1].tolist())  # input_id: positions
  it = iter(loader)
  got = [[x.clone() for x in fields(next(it))] for _ in range(failing)]
  with pytest.raises(ValueError, match='no rows for this batch'):
    next(it)
  for batch in iter(it.__next__, None):  # the epoch goes on (a for loop would start the next)
    got.append([x.clone() for x in fields(batch)])
  loader.shutdown()
  assert_same_batches(got, want[:failing] + want[failing + 1 :])


def test_batch_threads_run_their_kernels_alone():
  torch_threads = torch.get_num_threads()
  threads = BatchThreads(2)
  seen = [threads.launch(lambda: (ops.kernel_threads(), torch.get_num_threads())) for _ in range(4)]
  assert [s.result() for s in seen] == [(1, 1)] * 4
  assert torch.get_num_threads() == torch_threads  # the caller's own count
  threads.shutdown()
  assert not [t for t in threading.enumerate() if t.name.startswith('glt-batch')]
  with pytest.raises(RuntimeError, match='shut down'):
    threads.launch(ops.kernel_threads)

  def alone_then_back():
    before = ops.kernel_threads()  # a new thread's: torch's process-wide count
    ops.set_this_thread_kernel_threads(1)
    alone = ops.kernel_threads()
    ops.set_this_thread_kernel_threads(0)
    return before, alone, ops.kernel_threads()

  out = []
  thread = threading.Thread(target=lambda: out.append(alone_then_back()))
  thread.start()
  thread.join(30)
  assert len(out) == 1 and out[0][1] == 1 and out[0][2] == out[0][0]
  with pytest.raises(ValueError, match='must be >= 0'):
    ops.set_this_thread_kernel_threads(-1)


def test_concurrent_batches_below_one_are_refused():
  with pytest.raises(ValueError, match='concurrent_batches must be >= 1'):
    node_loader(0)
  with pytest.raises(ValueError, match='must be >= 1'):
    BatchThreads(0)
