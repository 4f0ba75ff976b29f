"""glt::sample_neighbors_temporal and glt::disjoint_keys, the CPU kernels
and the CUDA kernels' bodies (run by the host harness), against brute force:
no edge later than its seed's time, 'last' exactly the k latest allowed
edges, fanout -1 every allowed edge, 'uniform' uniform over the allowed
edges (chi-square), each neighbor keyed into its seed's subgraph, and the
inputs checked by name."""

from collections import Counter

import numpy as np
import pytest
import torch
from conftest import random_edges
from scipy import stats

import graphlearn_torch  # noqa: F401  (registers torch.ops.glt)

OPS = torch.ops.glt


def temporal_csr(num_rows, num_cols, num_edges, seed, dtype=torch.int64, time_dtype=torch.int64):
  """A random CSR topology whose rows are sorted by edge time (ties by
  input position), with distinct edge ids, weights and times in [0, 50)."""
  ei = random_edges(num_rows, num_cols, num_edges, seed)
  rng = np.random.default_rng(seed)
  time = torch.from_numpy(rng.integers(0, 50, num_edges)).to(time_dtype)
  # Sort by (row, time): a stable sort by time, then by row.
  by_time = torch.sort(time, stable=True).indices
  order = by_time[torch.sort(ei[0][by_time], stable=True).indices]
  rows, cols = ei[0][order], ei[1][order]
  indptr = torch.zeros(num_rows + 1, dtype=torch.int64)
  indptr[1:] = torch.bincount(rows, minlength=num_rows).cumsum(0)
  eids = order * 7 + 3
  weights = torch.from_numpy(rng.random(num_edges)).float()[order]
  return indptr.to(dtype), cols.to(dtype), eids, weights, time[order].contiguous()


def latest_times(indptr, time):
  """Each row's latest time, by brute force; the dtype's lowest for an
  empty row."""
  lowest = float('-inf') if time.is_floating_point() else torch.iinfo(time.dtype).min
  rows = [time[int(indptr[s]) : int(indptr[s + 1])].tolist() for s in range(indptr.numel() - 1)]
  return torch.tensor([max(r, default=lowest) for r in rows], dtype=time.dtype)


def allowed(indptr, time, s, t):
  """The positions of row s whose time is <= t, in row order."""
  return [p for p in range(int(indptr[s]), int(indptr[s + 1])) if time[p] <= t]


KERNELS = ['cpu', 'harness']


def run(kernel, harness, *args):
  fn = OPS.sample_neighbors_temporal if kernel == 'cpu' else harness.sample_neighbors_temporal
  return fn(*args)


@pytest.mark.parametrize('kernel', KERNELS)
@pytest.mark.parametrize('dtype', [torch.int64, torch.int32])
@pytest.mark.parametrize('time_dtype', [torch.int64, torch.float64])
@pytest.mark.parametrize('replace', [False, True])
@pytest.mark.parametrize('weighted', [False, True])
@pytest.mark.parametrize('last', [False, True])
@pytest.mark.parametrize('k', [-1, 1, 3, 40])
def test_draws_only_allowed_edges(harness, kernel, dtype, time_dtype, replace, weighted, last, k):
  indptr, indices, eids, weights, time = temporal_csr(60, 60, 1500, 3, dtype, time_dtype)
  seeds = torch.tensor([0, 5, 5, 59, 17, 33, 2, 40])
  seed_time = torch.tensor([10, 0, 49, 25, -1, 100, 30, 7]).to(time_dtype)
  w = weights if weighted else None
  nbr, num, eid = run(
    kernel, harness, indptr, indices, eids, w, time, seeds, seed_time, k, replace, last, 5
  )
  assert nbr.numel() == int(num.sum()) == eid.numel()
  start = 0
  for s, t, n in zip(seeds.tolist(), seed_time.tolist(), num.tolist()):
    ok = allowed(indptr, time, s, t)
    if last and k >= 0:
      ok = ok[-k:] if k else []
    candidates = [p for p in ok if not weighted or k == -1 or float(weights[p]) > 0]
    if k == -1:
      want = len(ok)
    elif replace:
      want = k if candidates else 0
    else:
      want = min(k, len(candidates))
    assert n == want
    by_eid = {int(eids[p]): p for p in candidates}
    got = eid[start : start + n].tolist()
    for e, v in zip(got, nbr[start : start + n].tolist()):
      assert e in by_eid, 'an edge later than its seed, or outside the window'
      assert int(indices[by_eid[e]]) == v
    if k == -1 or (last and not replace and not weighted):
      # Every allowed edge (fanout -1), or exactly the k latest ('last').
      assert sorted(got) == sorted(by_eid), 'not the allowed (latest) edges'
    elif not replace:
      assert len(set(got)) == len(got)
    start += n


@pytest.mark.parametrize('last', [False, True])
def test_counts_of_the_harness_equal_the_cpu_kernel(harness, last):
  indptr, indices, eids, weights, time = temporal_csr(200, 200, 8000, 5)
  seeds = torch.randint(0, 200, (300,))
  seed_time = torch.randint(0, 60, (300,))
  args = (indptr, indices, eids, None, time, seeds, seed_time, 4, False, last, 9)
  cpu = OPS.sample_neighbors_temporal(*args)
  host = harness.sample_neighbors_temporal(*args)
  assert torch.equal(cpu[1], host[1])
  if last:  # without randomness: the same edges
    assert torch.equal(cpu[2], host[2])


@pytest.mark.parametrize('kernel', KERNELS)
def test_uniform_draws_are_uniform_over_the_allowed_edges(harness, kernel):
  # One row of 20 edges with times 0..19; a seed of time 9 may take 10.
  indptr = torch.tensor([0, 20])
  indices = torch.arange(20)
  time = torch.arange(20)
  counts = Counter()
  for t in range(3000):
    nbr, _, _ = run(
      kernel,
      harness,
      indptr,
      indices,
      None,
      None,
      time,
      torch.tensor([0]),
      torch.tensor([9]),
      3,
      False,
      False,
      t,
    )
    counts.update(nbr.tolist())
  assert set(counts) <= set(range(10))
  assert stats.chisquare([counts[v] for v in range(10)]).pvalue > 1e-3


@pytest.mark.parametrize('kernel', KERNELS)
def test_draws_depend_on_the_seed_only(harness, kernel):
  indptr, indices, eids, _, time = temporal_csr(100, 100, 3000, 8)
  seeds = torch.randint(0, 100, (64,))
  seed_time = torch.randint(0, 50, (64,))
  runs = [
    run(kernel, harness, indptr, indices, eids, None, time, seeds, seed_time, 3, False, False, 21)
    for _ in range(2)
  ]
  assert all(torch.equal(a, b) for a, b in zip(*runs))


@pytest.mark.parametrize('kernel', KERNELS)
@pytest.mark.parametrize('time_dtype', [torch.int64, torch.float64])
@pytest.mark.parametrize('weighted', [False, True])
def test_rows_latest_times_leave_the_draws_as_they_are(harness, kernel, time_dtype, weighted):
  # A row's latest time, given apart, answers whether a seed takes the whole
  # row without a read of edge_time; the windows, so the draws, are those
  # found without it: empty rows, seeds at a row's latest time, just before
  # it and at random times.
  indptr, indices, eids, weights, time = temporal_csr(80, 80, 200, 4, time_dtype=time_dtype)
  latest = latest_times(indptr, time)
  assert (indptr[1:] == indptr[:-1]).any(), 'the graph has empty rows'
  seeds = torch.arange(80).repeat(3)
  filled = indptr[1:] > indptr[:-1]
  zero = torch.zeros(80, dtype=time_dtype)
  random = torch.from_numpy(np.random.default_rng(4).integers(-1, 52, 80)).to(time_dtype)
  seed_time = torch.cat(
    [torch.where(filled, latest, zero), torch.where(filled, latest - 1, zero), random]
  )
  w = weights if weighted else None
  for replace, last, k in [
    (False, False, 2),
    (True, False, 3),
    (False, True, 2),
    (False, False, -1),
  ]:
    args = (indptr, indices, eids, w, time, seeds, seed_time, k, replace, last, 11)
    plain = run(kernel, harness, *args)
    apart = run(kernel, harness, *args, latest)
    assert all(torch.equal(a, b) for a, b in zip(plain, apart)), (replace, last, k)


@pytest.mark.parametrize('kernel', KERNELS)
def test_bad_inputs_are_named(harness, kernel):
  indptr, indices, eids, _, time = temporal_csr(10, 10, 40, 2)
  seeds = torch.tensor([1, 2])
  good = torch.tensor([5, 5])

  def call(edge_time=time, seed_time=good, s=seeds, k=2, row_max_time=None):
    return run(
      kernel,
      harness,
      *(indptr, indices, eids, None, edge_time, s, seed_time, k, False, False, 0, row_max_time),
    )

  with pytest.raises(ValueError, match='seed_time must have edge_time'):
    call(seed_time=good.double())
  with pytest.raises(ValueError, match='seed_time must be 1-D with one entry per seed'):
    call(seed_time=torch.tensor([5]))
  with pytest.raises(ValueError, match='edge_time must be int64 or float64'):
    call(edge_time=time.int(), seed_time=good.int())
  with pytest.raises(ValueError, match='one entry per edge'):
    call(edge_time=time[:-1])
  with pytest.raises(ValueError, match='seeds holds ids outside'):
    call(s=torch.tensor([1, 10]))
  latest = latest_times(indptr, time)
  with pytest.raises(ValueError, match="row_max_time must have edge_time's dtype"):
    call(row_max_time=latest.double())
  with pytest.raises(
    ValueError, match='row_max_time must be a contiguous 1-D tensor with one entry'
  ):
    call(row_max_time=latest[:-1])


# -- disjoint keys ---------------------------------------------------------------


@pytest.mark.parametrize('kernel', KERNELS)
def test_disjoint_keys_put_each_neighbor_in_its_seeds_subgraph(harness, kernel):
  bits = 5
  seed_keys = torch.tensor([(0 << bits) | 3, (1 << bits) | 3, (7 << bits) | 31, (2 << bits) | 0])
  nbr_nums = torch.tensor([2, 0, 3, 1])
  nbrs = torch.tensor([4, 5, 0, 31, 9, 3])
  fn = OPS.disjoint_keys if kernel == 'cpu' else harness.disjoint_keys
  got = fn(seed_keys, nbrs, nbr_nums, bits)
  seed_of = torch.tensor([0, 0, 7, 7, 7, 2])  # brute force: each neighbor's seed
  assert torch.equal(got, (seed_of << bits) | nbrs)
  with pytest.raises(ValueError, match='nbrs holds ids outside'):
    fn(seed_keys, torch.tensor([4, 5, 0, 32, 9, 3]), nbr_nums, bits)
  with pytest.raises(ValueError, match='nbr_nums sums to 6 but nbrs holds 5'):
    fn(seed_keys, nbrs[:5], nbr_nums, bits)
  with pytest.raises(ValueError, match='nbr_nums has 3 entries for 4 seeds'):
    fn(seed_keys, nbrs, nbr_nums[:3], bits)
  with pytest.raises(ValueError, match='bits must be in'):
    fn(seed_keys, nbrs, nbr_nums, 63)
