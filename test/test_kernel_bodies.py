"""The CUDA kernels' code, run on the CPU: every op and the inducer through the
host harness (the same per-thread bodies and orchestration the CUDA build
launches, over every thread index with OpenMP threads), against the CPU
kernels and brute force. Deterministic ops must match the CPU kernels
exactly; random ones must be valid samples with the right distribution, and
reproducible whatever the thread count."""

import itertools
from collections import Counter

import numpy as np
import pytest
import torch
from conftest import random_edges
from scipy import stats

import graphlearn_torch  # noqa: F401  (registers torch.ops.glt)

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

OPS = torch.ops.glt


def csr(num_rows, num_cols, num_edges, seed, dtype=torch.int64, weighted=False):
  """A random CSR topology (duplicates allowed), with edge ids and weights."""
  ei = random_edges(num_rows, num_cols, num_edges, seed)
  indptr, indices, perm = OPS.coo_to_csr(ei[0], ei[1], num_rows, num_cols)
  eids = (perm * 7 + 3).contiguous()  # distinct, not positions
  g = torch.Generator().manual_seed(seed)
  weights = torch.rand(num_edges, generator=g) if weighted else None
  if weighted:
    weights[torch.rand(num_edges, generator=g) < 0.2] = 0.0
  return indptr.to(dtype), indices.to(dtype), eids, weights


# -- Philox --------------------------------------------------------------------


def test_philox_matches_random123_known_answers(harness):
  def block(key, ctr):
    # Counter words 0-1 are the block counter, 2-3 the stream.
    seed = key[0] | key[1] << 32
    counter, stream = ctr[0] | ctr[1] << 32, ctr[2] | ctr[3] << 32
    seed, counter, stream = (x - (1 << 64) if x >= 1 << 63 else x for x in (seed, counter, stream))
    words = [int(x) & (2**64 - 1) for x in harness.philox(seed, stream, counter, 2)]
    return [words[0] >> 32, words[0] & 0xFFFFFFFF, words[1] >> 32, words[1] & 0xFFFFFFFF]

  # philox4x32-10 vectors of Random123's kat_vectors.
  assert block([0, 0], [0, 0, 0, 0]) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
  assert block([0xFFFFFFFF] * 2, [0xFFFFFFFF] * 4) == [
    0x408F276D,
    0x41C83B0E,
    0xA20BC7C6,
    0x6D5451FD,
  ]
  assert block([0xA4093822, 0x299F31D0], [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344]) == [
    0xD16CFE09,
    0x94FDCCEB,
    0x5001E420,
    0x24126EA1,
  ]


# -- one hop of sampling ---------------------------------------------------------


@pytest.mark.parametrize('dtype', [torch.int64, torch.int32])
@pytest.mark.parametrize('replace', [False, True])
@pytest.mark.parametrize('weighted', [False, True])
@pytest.mark.parametrize('k', [-1, 1, 3, 40])
def test_sample_neighbors_is_a_valid_sample(harness, threads, dtype, replace, weighted, k):
  indptr, indices, eids, weights = csr(60, 60, 1500, seed=3, dtype=dtype, weighted=weighted)
  seeds = torch.tensor([0, 5, 5, 59, 17, 33, 2])
  nbr, num, eid = harness.sample_neighbors(indptr, indices, eids, weights, seeds, k, replace, 11)
  # The counts are the CPU kernel's (they are not random).
  _, cpu_num, _ = OPS.sample_neighbors(indptr, indices, eids, weights, seeds, k, replace, 11)
  assert torch.equal(num, cpu_num)
  assert nbr.dtype == torch.int64 and nbr.numel() == int(num.sum()) == eid.numel()
  start = 0
  for s, n in zip(seeds.tolist(), num.tolist()):
    lo, hi = int(indptr[s]), int(indptr[s + 1])
    positions = {int(eids[p]): p for p in range(lo, hi)}
    got = eid[start : start + n].tolist()
    for e, v in zip(got, nbr[start : start + n].tolist()):
      assert e in positions, "an edge id that is not one of the seed's edges"
      assert int(indices[positions[e]]) == v, "the neighbor is not the edge's other end"
      if weighted and k != -1:  # -1 takes every edge, whatever its weight
        assert float(weights[positions[e]]) > 0, 'an edge of weight 0 was drawn'
    if k == -1:  # every edge, in stored order
      assert got == [int(eids[p]) for p in range(lo, hi)]
    elif not replace:
      assert len(set(got)) == len(got), 'an edge drawn twice without replacement'
    start += n


def test_sample_neighbors_all_neighbors_equal_the_cpu_kernel(harness, threads):
  indptr, indices, eids, _ = csr(80, 80, 900, seed=5)
  seeds = torch.randperm(80)[:30]
  host = harness.sample_neighbors(indptr, indices, eids, None, seeds, -1, False, 1)
  cpu = OPS.sample_neighbors(indptr, indices, eids, None, seeds, -1, False, 1)
  for a, b in zip(host, cpu):
    assert torch.equal(a, b)


def test_sample_neighbors_depends_on_the_seed_only(harness):
  indptr, indices, eids, weights = csr(50, 50, 800, seed=2, weighted=True)
  seeds = torch.arange(50)
  runs = []
  for threads_, rng in ((1, 5), (4, 5), (3, 5), (4, 6)):
    harness.set_num_threads(threads_)
    runs.append(harness.sample_neighbors(indptr, indices, eids, weights, seeds, 4, False, rng))
  for a, b in zip(runs[0], runs[1]):
    assert torch.equal(a, b)
  for a, b in zip(runs[0], runs[2]):
    assert torch.equal(a, b)
  assert not torch.equal(runs[0][0], runs[3][0]), 'another rng seed gave the same sample'


def star(degree, weights=None):
  """Node 0 with `degree` out-edges to 1..degree."""
  src = torch.zeros(degree, dtype=torch.long)
  dst = torch.arange(1, degree + 1)
  indptr, indices, perm = OPS.coo_to_csr(src, dst, degree + 1, degree + 1)
  w = weights[perm].contiguous() if weights is not None else None
  return indptr, indices, w


def draw_counts(harness, indptr, indices, w, k, replace, trials):
  counts = Counter()
  for t in range(trials):
    nbr, _, _ = harness.sample_neighbors(indptr, indices, None, w, torch.tensor([0]), k, replace, t)
    counts.update(nbr.tolist())
  return counts


@pytest.mark.parametrize('replace', [False, True])
def test_uniform_sampling_is_uniform(harness, replace):
  harness.set_num_threads(4)
  indptr, indices, _ = star(10)
  counts = draw_counts(harness, indptr, indices, None, 3, replace, 4000)
  obs = [counts[v] for v in range(1, 11)]
  assert stats.chisquare(obs).pvalue > 1e-3


def test_weighted_sampling_with_replacement_follows_the_weights(harness):
  w = torch.tensor([1.0, 2.0, 3.0, 4.0, 0.0])
  indptr, indices, wt = star(5, w)
  counts = draw_counts(harness, indptr, indices, wt, 2, True, 8000)
  assert counts[5] == 0
  obs = [counts[v] for v in range(1, 5)]
  assert stats.chisquare(obs, np.array([1, 2, 3, 4]) / 10 * sum(obs)).pvalue > 1e-3


def test_weighted_sampling_without_replacement_follows_the_weights(harness):
  w = torch.tensor([1.0, 2.0, 3.0, 4.0])
  indptr, indices, wt = star(4, w)
  pairs = Counter()
  for t in range(6000):
    nbr, _, _ = harness.sample_neighbors(indptr, indices, None, wt, torch.tensor([0]), 2, False, t)
    pairs[tuple(sorted(nbr.tolist()))] += 1
  ws, total = w.tolist(), float(w.sum())
  keys = list(itertools.combinations(range(1, 5), 2))
  prob = np.array(
    [
      ws[i - 1] / total * ws[j - 1] / (total - ws[i - 1])
      + ws[j - 1] / total * ws[i - 1] / (total - ws[j - 1])
      for i, j in keys
    ]
  )
  obs = [pairs[p] for p in keys]
  assert stats.chisquare(obs, prob / prob.sum() * sum(obs)).pvalue > 1e-3


def test_sample_neighbors_checks_its_inputs(harness):
  indptr, indices, eids, _ = csr(10, 10, 30, seed=0)
  with pytest.raises(ValueError, match='seeds holds ids outside'):
    harness.sample_neighbors(indptr, indices, None, None, torch.tensor([10]), 2, False, 0)
  with pytest.raises(ValueError, match='indices must have indptr'):
    harness.sample_neighbors(indptr, indices.int(), None, None, torch.tensor([1]), 2, False, 0)
  with pytest.raises(ValueError, match='edge_ids must be contiguous'):
    harness.sample_neighbors(indptr, indices, eids[:3], None, torch.tensor([1]), 2, False, 0)
  with pytest.raises(ValueError, match='num_neighbors must be'):
    harness.sample_neighbors(indptr, indices, None, None, torch.tensor([1]), -2, False, 0)


# -- topology ops -------------------------------------------------------------------


def test_coo_to_csr_equals_the_cpu_kernel(harness, threads):
  ei = random_edges(70, 50, 2000, seed=9)
  host = harness.coo_to_csr(ei[0], ei[1], 75, 50)
  cpu = OPS.coo_to_csr(ei[0], ei[1], 75, 50)
  for a, b in zip(host, cpu):
    assert torch.equal(a, b)
  empty = torch.empty(0, dtype=torch.long)
  indptr, indices, perm = harness.coo_to_csr(empty, empty, 3, 3)
  assert indptr.tolist() == [0, 0, 0, 0] and indices.numel() == perm.numel() == 0
  with pytest.raises(ValueError, match='col holds ids outside'):
    harness.coo_to_csr(ei[0], ei[1], 75, 40)


@pytest.mark.parametrize('dtype', [torch.int64, torch.int32])
def test_has_edge_equals_the_cpu_kernel(harness, threads, dtype):
  indptr, indices, _, _ = csr(40, 40, 300, seed=4, dtype=dtype)
  g = torch.Generator().manual_seed(0)
  rows, cols = torch.randint(0, 40, (2, 3000), generator=g)
  host = harness.has_edge(indptr, indices, rows, cols)
  assert torch.equal(host, OPS.has_edge(indptr, indices, rows, cols))
  assert host.any() and not host.all()


@pytest.mark.parametrize('dtype', [torch.int64, torch.int32])
def test_induced_subgraph_equals_the_cpu_kernel(harness, threads, dtype):
  indptr, indices, eids, _ = csr(60, 60, 700, seed=6, dtype=dtype)
  nodes = torch.tensor([3, 59, 0, 17, 42, 8, 61, 25])  # 61: past the rows, no edges
  host = harness.induced_subgraph(indptr, indices, eids, nodes)
  cpu = OPS.induced_subgraph(indptr, indices, eids, nodes)
  for a, b in zip(host, cpu):
    assert torch.equal(a, b)
  assert host[0].numel() > 0
  with pytest.raises(ValueError, match='17 appears twice'):
    harness.induced_subgraph(indptr, indices, None, torch.tensor([17, 2, 17]))


def test_the_bodies_read_no_row_that_lies_outside_indices(harness):
  # As the CPU kernels (test_errors.py): row 1 runs backwards, row 2 past
  # the end of indices; each op raises the CPU kernel's error, naming it.
  indptr, indices = torch.tensor([0, 2, 1, 5, 3]), torch.tensor([0, 1, 2])
  for row in (1, 2):
    seeds = torch.tensor([0, row])
    calls = (
      ('sample_neighbors', (indptr, indices, None, None, seeds, 1, False, 0)),
      ('has_edge', (indptr, indices, seeds, torch.tensor([1, 1]))),
      ('induced_subgraph', (indptr, indices, None, seeds)),
      ('sample_negative', (indptr, indices, seeds, True, 3, 0, 1, True, 0)),
    )
    for name, args in calls:
      with pytest.raises(ValueError) as cpu:
        getattr(OPS, name)(*args)
      with pytest.raises(ValueError, match=f'indptr gives row {row} entries') as host:
        getattr(harness, name)(*args)
      assert str(host.value) == str(cpu.value), name
  found = harness.has_edge(indptr, indices, torch.tensor([0, 0]), torch.tensor([0, 2]))
  assert found.tolist() == [True, False]  # the rows that lie in indices are read as before


def brute_force_edges(indptr, indices):
  edges = set()
  for r in range(indptr.numel() - 1):
    for p in range(int(indptr[r]), int(indptr[r + 1])):
      edges.add((r, int(indices[p])))
  return edges


@pytest.mark.parametrize('padding', [False, True])
def test_sample_negative_draws_non_edges(harness, threads, padding):
  indptr, indices, _, _ = csr(30, 20, 200, seed=8)
  edges = brute_force_edges(indptr, indices)
  rows, cols = harness.sample_negative(indptr, indices, None, True, 20, 500, 5, padding, 3)
  pairs = list(zip(rows.tolist(), cols.tolist()))
  if padding:
    assert len(pairs) == 500
  hits = sum(p in edges for p in pairs)
  assert hits == 0 if not padding else hits <= 10
  assert all(0 <= r < 30 and 0 <= c < 20 for r, c in pairs)
  fixed = torch.tensor([4, 4, 29, 0])
  rows, cols = harness.sample_negative(indptr, indices, fixed, True, 20, 0, 5, True, 3)
  assert rows.tolist() == fixed.tolist()
  fixed = torch.tensor([4, 4, 19, 0])  # columns this time
  rows, cols = harness.sample_negative(indptr, indices, fixed, False, 20, 0, 5, True, 3)
  assert cols.tolist() == fixed.tolist()
  again = harness.sample_negative(indptr, indices, fixed, False, 20, 0, 5, True, 3)
  assert torch.equal(again[0], rows)


def test_sample_negative_is_uniform_over_non_edges(harness):
  indptr, indices, _, _ = csr(6, 6, 10, seed=1)
  edges = brute_force_edges(indptr, indices)
  rows, cols = harness.sample_negative(indptr, indices, None, True, 6, 40000, 8, False, 5)
  counts = Counter(zip(rows.tolist(), cols.tolist()))
  non_edges = [(r, c) for r in range(6) for c in range(6) if (r, c) not in edges]
  assert set(counts) <= set(non_edges)
  assert stats.chisquare([counts[p] for p in non_edges]).pvalue > 1e-3


# -- feature gather ------------------------------------------------------------------


@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.int64, torch.bool])
def test_gather_rows_equals_index_select(harness, threads, dtype):
  table = (torch.randn(50, 7) * 10).to(dtype)
  ids = torch.tensor([3, 49, 0, 3, 17])
  assert torch.equal(harness.gather_rows(table, ids, None, None, -1), table[ids])
  id2index = torch.randperm(50)
  assert torch.equal(harness.gather_rows(table, ids, id2index, None, -1), table[id2index[ids]])
  positions = torch.tensor([6, 0, 2, 4, 1])
  out = harness.gather_rows(table, ids, None, positions, 8)
  assert out.shape == (8, 7) and torch.equal(out[positions], table[ids])
  assert torch.equal(OPS.gather_rows(table, ids, id2index, None, -1), table[id2index[ids]])


def test_gather_rows_names_a_bad_id(harness):
  table = torch.randn(10, 3)
  with pytest.raises(ValueError, match='id 12 is out of range'):
    harness.gather_rows(table, torch.tensor([1, 12, 3]), None, None, -1)
  id2index = torch.tensor([0, -1, 2])
  with pytest.raises(ValueError, match='id 1 has no feature row'):
    harness.gather_rows(table, torch.tensor([0, 1]), id2index, None, -1)


# -- the inducer ------------------------------------------------------------------------


def flat(x):
  if isinstance(x, torch.Tensor):
    return [x.tolist()]
  return [v for item in x for v in flat(item)]


def run_hops(inducer, num_types, seed, hops=3, in_place=False, distinct=None):
  """Random seeds and hops through an inducer, each hop from the nodes the
  last one added; returns everything it answered. With ``in_place`` the
  local indices go into given slices of larger buffers. ``distinct``: None
  draws seeds with repeats; False draws distinct ones, True too and says so
  (``init_nodes(distinct=True)``)."""
  g = torch.Generator().manual_seed(seed)
  sizes = torch.randint(0, 40, (num_types,), generator=g).tolist()
  if distinct is None:
    seeds = [torch.randint(0, 500, (n,), generator=g) for n in sizes]
  else:
    seeds = [torch.randperm(500, generator=g)[:n] for n in sizes]
  answers = [inducer.init_nodes(seeds, distinct=bool(distinct))]
  frontier = answers[0]
  for _ in range(hops):
    src_types, nbr_types, srcs, nbrs, nums = [], [], [], [], []
    for src_t in range(num_types):
      if frontier[src_t].numel() == 0:
        continue
      num = torch.randint(0, 6, (frontier[src_t].numel(),), generator=g)
      src_types.append(src_t)
      nbr_types.append(int(torch.randint(0, num_types, (1,), generator=g)))
      srcs.append(frontier[src_t])
      nums.append(num)
      nbrs.append(torch.randint(0, 3000, (int(num.sum()),), generator=g))
    outs = {}
    if in_place:
      outs = {
        k: [torch.full((nbr.numel() + 2,), -9)[1:-1] for nbr in nbrs]
        for k in ('row_outs', 'col_outs')
      }
    answers.append(inducer.induce_next(src_types, nbr_types, srcs, nbrs, nums, **outs))
    if in_place:
      _, rows, cols = answers[-1]
      assert [t.data_ptr() for t in rows] == [t.data_ptr() for t in outs['row_outs']]
      assert [t.data_ptr() for t in cols] == [t.data_ptr() for t in outs['col_outs']]
    frontier = answers[-1][0]
  answers.append(inducer.local_ids(0, torch.tensor([-3, 0, 1, 2, 499, 2999])))
  return answers


@pytest.mark.parametrize('num_types', [1, 3])
@pytest.mark.parametrize('seed', [0, 1, 2])
def test_inducer_equals_the_cpu_inducer(harness, threads, num_types, seed):
  host = run_hops(harness.Inducer(num_types), num_types, seed)
  cpu = run_hops(graphlearn_torch._ext.ops.Inducer(num_types, []), num_types, seed)
  assert flat(host) == flat(cpu)


@pytest.mark.parametrize('num_types', [1, 3])
@pytest.mark.parametrize('seed', [0, 1])
def test_inducer_adds_seeds_vouched_distinct_as_any_others(harness, threads, num_types, seed):
  """init_nodes(distinct=True), as disjoint sampling's keys are added: no
  count read back, the seeds given back as they are, and every hop after
  answers as after the plain init_nodes of the same seeds."""
  cpu_inducer = graphlearn_torch._ext.ops.Inducer
  plain = run_hops(cpu_inducer(num_types, []), num_types, seed, distinct=False)
  for inducer in (harness.Inducer(num_types), cpu_inducer(num_types, [])):
    assert flat(run_hops(inducer, num_types, seed, distinct=True)) == flat(plain)


def test_a_negative_seed_vouched_distinct_fails_its_hop(harness):
  """A negative seed wrongly vouched distinct is not added: the hop drawn
  from it names it, as it does any unknown seed."""
  inducer = harness.Inducer(1)
  frontier = inducer.init_nodes([torch.tensor([1, -4])], distinct=True)
  with pytest.raises(ValueError, match='-4'):
    inducer.induce_next([0], [0], frontier, [torch.tensor([7, 8])], [torch.tensor([1, 1])])


@pytest.mark.parametrize('num_types', [1, 3])
def test_inducer_writes_given_outputs_in_place(harness, threads, num_types):
  cpu = run_hops(graphlearn_torch._ext.ops.Inducer(num_types, []), num_types, 7)
  for inducer in (harness.Inducer(num_types), graphlearn_torch._ext.ops.Inducer(num_types, [])):
    assert flat(run_hops(inducer, num_types, 7, in_place=True)) == flat(cpu)


@pytest.mark.parametrize('kind', ['host', 'cpu'])
def test_inducer_checks_given_outputs(harness, kind):
  inducer = harness.Inducer(1) if kind == 'host' else graphlearn_torch._ext.ops.Inducer(1, [])
  inducer.init_nodes([torch.tensor([1, 2])])
  nbrs = torch.tensor([4, 5, 6])
  args = ([0], [0], [torch.tensor([1, 2])], [nbrs], [torch.tensor([1, 2])])
  three = torch.empty(3, dtype=torch.long)
  with pytest.raises(ValueError, match='row_outs must be empty or hold one tensor per edge type'):
    inducer.induce_next(*args, row_outs=[three, three])
  with pytest.raises(ValueError, match='col_outs must hold 3 entries, got 2'):
    inducer.induce_next(*args, col_outs=[torch.empty(2, dtype=torch.long)])
  with pytest.raises(ValueError, match='row_outs must be int64'):
    inducer.induce_next(*args, row_outs=[torch.empty(3, dtype=torch.int32)])
  with pytest.raises(ValueError, match='row_outs must be contiguous'):
    inducer.induce_next(*args, row_outs=[torch.empty(6, dtype=torch.long)[::2]])
  with pytest.raises(ValueError, match='col_outs shares memory with an input'):
    inducer.induce_next(*args, col_outs=[nbrs])
  with pytest.raises(ValueError, match='col_outs shares memory with an input'):
    inducer.induce_next(*args, row_outs=[three], col_outs=[three])
  # nothing was written: the same hop still answers from the seeds alone
  col = torch.empty(3, dtype=torch.long)
  new, rows, cols = inducer.induce_next(*args, row_outs=[three], col_outs=[col])
  assert (new[0].tolist(), rows[0].tolist(), cols[0].tolist()) == ([4, 5, 6], [0, 1, 1], [2, 3, 4])
  assert rows[0].data_ptr() == three.data_ptr() and cols[0].data_ptr() == col.data_ptr()


def test_inducer_grows_its_tables_and_resets(harness, threads):
  big = torch.randint(0, 10**9, (50_000,))
  steps = [
    ('init_nodes', ([torch.tensor([5, 5, 9])],)),
    ('induce_next', ([0], [0], [torch.tensor([5, 9])], [big], [torch.tensor([20_000, 30_000])])),
    ('local_ids', (0, big[:100])),
    ('init_nodes', ([torch.tensor([7])],)),
    ('local_ids', (0, torch.tensor([5, 7]))),
  ]
  host, cpu = (
    [getattr(inducer, kind)(*args) for kind, args in steps]
    for inducer in (harness.Inducer(1), graphlearn_torch._ext.ops.Inducer(1, []))
  )
  assert flat(host) == flat(cpu)
  assert host[-1].tolist() == [-1, 0]


@pytest.mark.parametrize(
  'bad, error',
  [
    (dict(srcs=[torch.tensor([1, -2])]), r'srcs holds ids outside \[0, \d+\): -2'),
    (dict(nbrs=[torch.tensor([4, -5, 6])]), r'nbrs holds ids outside \[0, \d+\): -5'),
    (dict(nbr_nums=[torch.tensor([4, -1])]), 'nbr_nums must be >= 0'),
    (dict(nbr_nums=[torch.tensor([1, 1])]), 'nbr_nums sums to 2 but nbrs holds 3 entries'),
    (dict(nbr_nums=[torch.tensor([3, 1])]), 'nbr_nums sums to 4 but nbrs holds 3 entries'),
    (dict(srcs=[torch.tensor([1, 9])]), 'source node 9 was not seen'),
  ],
)
def test_inducer_reads_a_hops_checks_after_it_and_forgets_a_bad_one(harness, bad, error):
  """A hop's inputs are checked on the device as it runs and read once with
  its sizes: a bad one is named, and every node is forgotten (a second,
  sound request before it had already added its neighbors)."""
  inducer = harness.Inducer(2)
  inducer.init_nodes([torch.tensor([1, 2]), torch.tensor([3])])
  hop = dict(
    src_types=[1, 0], nbr_types=[0, 1], srcs=[torch.tensor([3]), torch.tensor([1, 2])],
    nbrs=[torch.tensor([8]), torch.tensor([4, 5, 6])],
    nbr_nums=[torch.tensor([1]), torch.tensor([1, 2])],
  )  # fmt: skip
  with pytest.raises(ValueError, match=error):
    inducer.induce_next(**{k: v[:1] + bad.get(k, v[1:]) for k, v in hop.items()})
  assert inducer.local_ids(0, torch.tensor([1, 2, 8])).tolist() == [-1, -1, -1]
  assert inducer.local_ids(1, torch.tensor([3])).tolist() == [-1]


def test_inducer_expands_rows_of_any_length(harness, threads):
  """Sources of no neighbor, one and many (a hub's 5,000), each edge's row
  found by its position among the counts' running sums."""
  nums = torch.tensor([0, 5000, 0, 0, 1, 3, 0, 2000, 0])
  srcs = torch.arange(nums.numel())
  nbrs = torch.randint(0, 10**6, (int(nums.sum()),), generator=torch.Generator().manual_seed(4))
  answers = []
  for inducer in (harness.Inducer(1), graphlearn_torch._ext.ops.Inducer(1, [])):
    inducer.init_nodes([srcs])
    answers.append(flat(inducer.induce_next([0], [0], [srcs], [nbrs], [nums])))
  assert answers[0] == answers[1]


def test_inducer_names_an_unseen_source(harness):
  inducer = harness.Inducer(2)
  inducer.init_nodes([torch.tensor([1, 2]), torch.tensor([], dtype=torch.long)])
  with pytest.raises(ValueError, match='source node 3 was not seen'):
    inducer.induce_next(
      [0], [1], [torch.tensor([1, 3])], [torch.tensor([4])], [torch.tensor([1, 0])]
    )
  with pytest.raises(ValueError, match='nbr_nums sums to 2'):
    inducer.induce_next([0], [1], [torch.tensor([1])], [torch.tensor([4])], [torch.tensor([2])])
  with pytest.raises(ValueError, match='node type index 5'):
    inducer.local_ids(5, torch.tensor([1]))
