"""The CPU kernels' parallel loops (csrc/cpu/runtime/parallel.h): work claimed chunk
by chunk by whichever of the calling thread and the worker pool's helpers is
running. Results must not depend on the thread count, on other busy
processes, on concurrent callers, or on a fork after the pool started."""

import multiprocessing as mp
import os
import subprocess
import sys
import threading

import pytest
import torch

from graphlearn_torch._ext import ops
from graphlearn_torch.data import Dataset, Feature
from graphlearn_torch.sampler import NeighborSampler, NodeSamplerInput
from graphlearn_torch.utils import threads

FANOUT = [10, 5, 3]


@pytest.fixture(scope='module')
def graph():
  """A graph whose hops span many chunks (256 seeds each) and, at 4 threads,
  the inducer's parallel insert (32,768 neighbors and more)."""
  g = torch.Generator().manual_seed(3)
  num_nodes, num_edges = 20_000, 400_000
  ei = torch.randint(0, num_nodes, (2, num_edges), generator=g)
  ds = Dataset(edge_dir='out')
  ds.init_graph(ei, graph_mode='CPU', num_nodes=num_nodes)
  return ds


def sample(ds, seeds, seed=7):
  sampler = NeighborSampler(ds.graph, FANOUT, device='cpu', with_edge=True, seed=seed)
  return sampler.sample_from_nodes(NodeSamplerInput(seeds))


def fields(out):
  return [out.node, out.row, out.col, out.edge, torch.tensor(out.num_sampled_nodes)]


def assert_same(a, b):
  for x, y in zip(fields(a), fields(b), strict=True):
    assert torch.equal(x, y)


SEEDS = torch.arange(0, 20_000, 5)


@pytest.mark.timeout(300)
@pytest.mark.parametrize('id_maps', ['id-indexed', 'hashed'])
def test_same_batch_at_every_thread_count(graph, thread_count, id_maps, monkeypatch):
  if id_maps == 'hashed':  # as on a graph over 8 M nodes: the hash table's parallel insert
    import graphlearn_torch.sampler.multihop as multihop

    monkeypatch.setattr(multihop, 'DENSE_INDUCER_MAX_NODES', 0)
  torch.set_num_threads(1)
  expected = sample(graph, SEEDS)
  assert expected.row.numel() > 32_768  # the last hop takes the parallel insert at 4 threads
  for count in (2, 3, 4, 2):
    torch.set_num_threads(count)
    for _ in range(3):
      assert_same(sample(graph, SEEDS), expected)


class BusyProcesses:
  """Busy-looping processes beside the test, killed and reaped on exit."""

  def __init__(self, count):
    self.procs = []
    self.count = count

  def __enter__(self):
    for _ in range(self.count):
      self.procs.append(subprocess.Popen([sys.executable, '-c', 'while True: pass']))
    return self

  def __exit__(self, *exc):
    for p in self.procs:
      p.kill()
    for p in self.procs:
      p.wait(timeout=30)


@pytest.mark.timeout(300)
def test_hash_tables_take_a_long_hop_in_pieces_as_id_indexed_maps_do(
  graph, monkeypatch, thread_count
):
  # A hash table takes room for 65,536 keys at a time (262,144 in a parallel
  # insert), so that it grows with the distinct nodes, not the draws: every
  # seed of the graph draws 200,000 neighbors, 20,000 of them distinct,
  # across the pieces' seams.
  import graphlearn_torch.sampler.multihop as multihop

  torch.set_num_threads(1)
  every_node = torch.arange(20_000)
  expected = sample(graph, every_node)
  assert expected.row.numel() > 3 * 65_536
  monkeypatch.setattr(multihop, 'DENSE_INDUCER_MAX_NODES', 0)
  assert_same(sample(graph, every_node), expected)
  # A hop drawn elsewhere (over RPC, temporal) is inserted the same way, and
  # at 4 threads in parallel, 262,144 keys at a time: 600,000 draws cross
  # both kinds of seams.
  nbrs = torch.randint(0, 20_000, (600_000,), generator=torch.Generator().manual_seed(5))
  counts = torch.full((20_000,), 30)
  answers = []
  for sizes, count in (([20_000], 1), ([], 1), ([], 4)):  # id-indexed, then hash tables
    torch.set_num_threads(count)
    inducer = ops.Inducer(1, sizes)
    inducer.init_nodes([every_node.flip(0)])
    answers.append(inducer.induce_next([0], [0], [every_node.flip(0)], [nbrs], [counts]))
  for dense, *hashed in zip(*answers, strict=True):
    for a, *b in zip(dense, *hashed, strict=True):
      assert all(torch.equal(a, other) for other in b)


# A generous bound, not a timing: this takes seconds, and minutes where the
# table takes room a piece at a time.
@pytest.mark.timeout(60)
def test_disjoint_keys_go_into_a_fresh_hash_table_at_once(thread_count):
  # A disjoint hop drawn elsewhere (induce_next): 3,000,000 neighbors keyed
  # into 3,000 seeds' groups (seed << 32 | id), each group's keys hashed
  # into a region of the table of its own. A table given room a piece at a
  # time has regions too small for their keys (seconds a million keys,
  # growing faster than the keys); these go in at once, in order at 1
  # thread and in parallel at 4, with the ids a sequential insert gives.
  bits, num_seeds, fanout = 32, 3000, 1000
  g = torch.Generator().manual_seed(11)
  seed_keys = (torch.arange(num_seeds) << bits) | torch.randperm(1 << 20, generator=g)[:num_seeds]
  groups = torch.arange(num_seeds).repeat_interleave(fanout)
  nbr_keys = (groups << bits) | torch.randint(0, 5000, (num_seeds * fanout,), generator=g)
  local = {}
  for key in seed_keys.tolist() + nbr_keys.tolist():
    local.setdefault(key, len(local))
  expected_cols = torch.tensor([local[key] for key in nbr_keys.tolist()])
  expected_new = torch.tensor(list(local)[num_seeds:])
  for count in (1, 4):
    torch.set_num_threads(count)
    inducer = ops.Inducer(1, [], bits)
    inducer.init_nodes([seed_keys])
    new, rows, cols = inducer.induce_next(
      [0], [0], [seed_keys], [nbr_keys], [torch.full((num_seeds,), fanout)]
    )
    assert torch.equal(rows[0], groups)
    assert torch.equal(cols[0], expected_cols)
    assert torch.equal(new[0], expected_new)


@pytest.mark.timeout(300)
def test_same_batch_beside_busy_processes(graph, thread_count):
  torch.set_num_threads(1)
  expected = sample(graph, SEEDS)
  feat_table = torch.randn(graph.num_nodes(), 16)
  expected_rows = feat_table[expected.node]
  feature = Feature(feat_table, with_gpu=False)
  torch.set_num_threads(2)
  with BusyProcesses(2):
    for _ in range(10):
      out = sample(graph, SEEDS)
      assert_same(out, expected)
      assert torch.equal(feature[out.node], expected_rows)


@pytest.mark.timeout(300)
def test_concurrent_callers_get_their_own_batches(graph, thread_count):
  """Python threads sampling at once: one holds the pool, the others work
  alone, and each gets the batch its seed gives."""
  torch.set_num_threads(1)
  seed_sets = [torch.arange(i, 20_000, 7) for i in range(4)]
  expected = [sample(graph, s, seed=i) for i, s in enumerate(seed_sets)]
  torch.set_num_threads(2)
  errors = []

  def run(i):
    try:
      for _ in range(5):
        assert_same(sample(graph, seed_sets[i], seed=i), expected[i])
    except BaseException as e:  # reported by the main thread
      errors.append(e)

  workers = [threading.Thread(target=run, args=(i,)) for i in range(4)]
  for w in workers:
    w.start()
  for w in workers:
    w.join(timeout=240)
  assert not any(w.is_alive() for w in workers)
  assert not errors, errors


def _gather_in_child(table, ids, conn):
  torch.set_num_threads(2)
  conn.send(ops.gather_rows(table, ids, None).numpy())  # no torch op (see below)
  conn.close()


@pytest.mark.timeout(300)
def test_a_forked_child_runs_parallel_loops(thread_count):
  """The pool's helpers do not survive a fork: the child makes its own. (The
  child calls our kernel alone and sends its result as a NumPy array:
  libgomp, which torch's own ops use, hangs in a child forked after its
  threads started.)"""
  torch.set_num_threads(2)
  table = torch.randn(50_000, 8)
  ids = torch.randint(0, 50_000, (400_000,), generator=torch.Generator().manual_seed(1))
  expected = ops.gather_rows(table, ids, None)  # the parent's pool has helpers now
  assert torch.equal(expected, table[ids])
  ctx = mp.get_context('fork')
  parent, child = ctx.Pipe()
  proc = ctx.Process(target=_gather_in_child, args=(table, ids, child))
  proc.start()
  try:
    assert parent.poll(120), 'the forked child did not finish its gather'
    got = parent.recv()
  finally:
    proc.join(timeout=30)
    if proc.is_alive():
      proc.kill()
      proc.join()
  assert proc.exitcode == 0
  assert torch.equal(torch.from_numpy(got), expected)


@pytest.mark.timeout(300)
def test_an_error_inside_a_parallel_loop_leaves_the_pool_working(graph, thread_count):
  torch.set_num_threads(2)
  table = torch.randn(graph.num_nodes(), 8)
  feature = Feature(table, with_gpu=False)
  ids = torch.arange(graph.num_nodes())
  bad = ids.clone()
  bad[15_000] = graph.num_nodes() + 3
  for _ in range(3):
    with pytest.raises(ValueError, match='out of range'):
      feature[bad]
    assert torch.equal(feature[ids], table)


@pytest.fixture
def kernel_thread_cap(monkeypatch):
  """Restores the kernel thread cap after a test changes it."""
  monkeypatch.delenv(threads.ENV_VAR, raising=False)
  cap = threads.kernel_thread_cap()
  yield
  threads.set_kernel_threads(cap)


@pytest.mark.timeout(300)
def test_the_cap_bounds_the_kernel_threads_and_not_the_batches(
  graph, thread_count, kernel_thread_cap
):
  torch.set_num_threads(2)
  threads.set_kernel_threads(None)
  assert threads.kernel_threads() == 2 and threads.kernel_thread_cap() is None
  expected = sample(graph, SEEDS)
  threads.set_kernel_threads(1)
  assert threads.kernel_threads() == 1 and threads.kernel_thread_cap() == 1
  assert_same(sample(graph, SEEDS), expected)
  threads.set_kernel_threads(8)  # torch's count still bounds it
  assert threads.kernel_threads() == 2
  with pytest.raises(ValueError, match='>= 0'):
    threads.set_kernel_threads(-1)


def test_processes_sharing_a_host_take_their_share(kernel_thread_cap, monkeypatch):
  cores = threads.available_cores()
  threads.set_kernel_threads(None)
  threads.cap_for_shared_host(2 * cores)
  assert threads.kernel_thread_cap() == 1  # never below one thread
  threads.set_kernel_threads(None)
  threads.cap_for_shared_host(1)
  assert threads.kernel_thread_cap() == cores
  # A cap already set, or the variable, wins over the share.
  threads.set_kernel_threads(3)
  threads.cap_for_shared_host(2 * cores)
  assert threads.kernel_thread_cap() == 3
  threads.set_kernel_threads(None)
  monkeypatch.setenv(threads.ENV_VAR, '0')
  threads.cap_for_shared_host(2 * cores)
  assert threads.kernel_thread_cap() is None


def test_the_variable_sets_the_cap_at_import():
  code = 'import graphlearn_torch as glt; print(glt.utils.kernel_thread_cap())'
  env = {**os.environ, threads.ENV_VAR: '1'}
  out = subprocess.run(
    [sys.executable, '-c', code], env=env, capture_output=True, text=True, timeout=120
  )
  assert out.returncode == 0 and out.stdout.strip() == '1', out.stderr
  env[threads.ENV_VAR] = 'two'
  out = subprocess.run(
    [sys.executable, '-c', code], env=env, capture_output=True, text=True, timeout=120
  )
  assert out.returncode != 0 and 'GLT_KERNEL_THREADS must be a thread count' in out.stderr


@pytest.mark.parametrize('dtype', [torch.int64, torch.int32, torch.float32])
def test_concat_equals_torch_cat(dtype, thread_count):
  torch.set_num_threads(2)
  g = torch.Generator().manual_seed(0)
  sizes = [0, 70_000, 3, 0, 100_000, 1]  # parts that span chunks and parts inside one
  parts = [torch.randint(-1000, 1000, (n,), generator=g).to(dtype) for n in sizes]
  assert torch.equal(torch.ops.glt.concat(parts), torch.cat(parts))
  assert torch.equal(torch.ops.glt.concat(parts[:1]), parts[0])


def test_concat_names_bad_input():
  with pytest.raises(ValueError, match='1-D'):
    torch.ops.glt.concat([torch.zeros(2), torch.zeros(2, 2)])
  with pytest.raises(ValueError, match='one dtype'):
    torch.ops.glt.concat([torch.zeros(2), torch.zeros(2, dtype=torch.int64)])


SLEEPY_BATCH = """
import torch
from graphlearn_torch.data import Dataset
from graphlearn_torch.sampler import NeighborSampler, NodeSamplerInput
torch.set_num_threads(4)
g = torch.Generator().manual_seed(3)
ei = torch.randint(0, 20_000, (2, 400_000), generator=g)
ds = Dataset(edge_dir='out')
ds.init_graph(ei, graph_mode='CPU', num_nodes=20_000)
for _ in range(3):
  sampler = NeighborSampler(ds.graph, [10, 5, 3], device='cpu', with_edge=True, seed=7)
  out = sampler.sample_from_nodes(NodeSamplerInput(torch.arange(0, 20_000, 5)))
  print([int(t.sum()) for t in (out.node, out.row, out.col, out.edge)], out.num_sampled_nodes)
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize('spin_us', ['0', '100000'])
def test_helpers_that_sleep_at_once_or_spin_long_give_the_same_batches(graph, spin_us):
  r"""GLT_WORKER_SPIN_US=0: idle helpers sleep at once, so every loop wakes
  them (the pool's sleep and wake path); 100 ms: they never sleep between
  loops. Either way, at 4 threads, the batches of one thread."""
  torch.set_num_threads(1)
  expected = sample(graph, SEEDS)
  sums = [int(t.sum()) for t in (expected.node, expected.row, expected.col, expected.edge)]
  line = f'{sums} {expected.num_sampled_nodes}'
  env = {**os.environ, 'GLT_WORKER_SPIN_US': spin_us}
  out = subprocess.run(
    [sys.executable, '-c', SLEEPY_BATCH], env=env, capture_output=True, text=True, timeout=240
  )
  assert out.returncode == 0, out.stderr
  assert out.stdout.split('\n')[:3] == [line] * 3, out.stdout
