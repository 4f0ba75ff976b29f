"""A hop drawn and added at once by the device inducer (kernels/hop_induce.h:
buffers sized by the fanout, sizes and checks kept on the device until one
read a hop), run on the CPU through the host harness, against the same
kernels' sample_neighbors then induce_next, which must give the same batch
exactly (the CPU kernels draw other samples from the same seeds)."""

import pytest
import torch
from test_kernel_bodies import csr, flat

# Builds the host harness: left out of make test-fast.
pytestmark = pytest.mark.slow

NUM_NODES = [300, 120, 40]


def hetero_graph(num_types, seed, dtype, weighted):
  """Every (src type, nbr type) pair's CSR topology, with edge ids (and
  weights)."""
  graph = {}
  for s in range(num_types):
    for d in range(num_types):
      graph[(s, d)] = csr(NUM_NODES[s], NUM_NODES[d], 6 * NUM_NODES[s], seed + 10 * s + d, dtype,
                          weighted)  # fmt: skip
  return graph


def fused_hop(harness, inducer, **request):
  r"""One hop through ``sample_induce_next``."""
  return inducer.sample_induce_next(**request)


def unfused_hop(harness, inducer, **request):
  r"""The same hop as the kernels' sample_neighbors, then induce_next."""
  draws = [
    harness.sample_neighbors(indptr, indices, eids, weights, srcs, fanout, request['replace'], seed)
    for indptr, indices, eids, weights, srcs, fanout, seed in zip(
      *(
        request[k]
        for k in ('indptrs', 'indices', 'edge_ids', 'edge_weights', 'srcs', 'fanouts', 'rng_seeds')
      )  # fmt: skip
    )
  ]
  new, rows, cols = inducer.induce_next(
    request['src_types'], request['nbr_types'], request['srcs'], [d[0] for d in draws],
    [d[1] for d in draws],
  )  # fmt: skip
  rows = [torch.cat([p, r]) for p, r in zip(request['row_prefixes'], rows)]
  cols = [torch.cat([p, c]) for p, c in zip(request['col_prefixes'], cols)]
  return new, rows, cols, [d[0] for d in draws], [d[1] for d in draws], [d[2] for d in draws]


def run_hops(hop, harness, graph, num_types, fanouts, replace, with_edge, weighted, seed):
  """Seeds of every type, then one ``hop`` per hop over every edge type
  whose seeds are not empty; returns everything answered."""
  inducer = harness.Inducer(num_types)
  g = torch.Generator().manual_seed(seed)
  seeds = [torch.randint(0, NUM_NODES[t], (9,), generator=g) for t in range(num_types)]
  answers = [inducer.init_nodes(seeds)]
  frontier = answers[0]
  rows = {e: torch.empty(0, dtype=torch.long) for e in graph}
  cols = dict(rows)
  for i, fanout in enumerate(fanouts):
    etypes = [e for e in graph if frontier[e[0]].numel() > 0]
    topos = [graph[e] for e in etypes]
    out = hop(
      harness,
      inducer,
      src_types=[s for s, _ in etypes],
      nbr_types=[d for _, d in etypes],
      srcs=[frontier[s] for s, _ in etypes],
      indptrs=[t[0] for t in topos],
      indices=[t[1] for t in topos],
      edge_ids=[t[2] if with_edge else None for t in topos],
      edge_weights=[t[3] if weighted else None for t in topos],
      fanouts=[fanout] * len(etypes),
      replace=replace,
      rng_seeds=[100 * i + j for j in range(len(etypes))],
      row_prefixes=[rows[e] for e in etypes],
      col_prefixes=[cols[e] for e in etypes],
    )
    answers.append(out)
    for e, row, col in zip(etypes, out[1], out[2]):
      rows[e], cols[e] = row, col
    frontier = out[0]
  answers.append([inducer.local_ids(t, torch.arange(-1, NUM_NODES[t])) for t in range(num_types)])
  return answers


@pytest.mark.parametrize('num_types', [1, 3])
@pytest.mark.parametrize('dtype', [torch.int64, torch.int32])
@pytest.mark.parametrize(
  'fanouts,replace,weighted',
  [([4, 3, 2], False, False), ([3, 3], True, False), ([4, 2], False, True), ([2, 2], True, True),
   ([2, -1], False, False), ([0, 3], False, False)],
)  # fmt: skip
def test_fused_hops_equal_the_cpu_inducer(harness, threads, num_types, dtype, fanouts, replace,
                                          weighted):  # fmt: skip
  graph = hetero_graph(num_types, 3, dtype, weighted)
  args = (harness, graph, num_types, fanouts, replace, True, weighted, 5)
  assert flat(run_hops(fused_hop, *args)) == flat(run_hops(unfused_hop, *args))


def test_fused_hops_without_edge_ids(harness):
  graph = hetero_graph(1, 4, torch.int64, False)
  args = (harness, graph, 1, [5, 5], False, False, False, 6)
  fused = run_hops(fused_hop, *args)
  assert flat(fused) == flat(run_hops(unfused_hop, *args))
  assert all(eids.numel() == 0 for *_, eid_list in fused[1:-1] for eids in eid_list)


def one_hop(inducer, srcs, indptr, indices, **overrides):
  args = dict(
    src_types=[0],
    nbr_types=[0],
    srcs=[srcs],
    indptrs=[indptr],
    indices=[indices],
    edge_ids=[None],
    edge_weights=[None],
    fanouts=[2],
    replace=False,
    rng_seeds=[1],
    row_prefixes=[torch.empty(0, dtype=torch.long)],
    col_prefixes=[torch.empty(0, dtype=torch.long)],
  )
  args.update(overrides)
  return inducer.sample_induce_next(**args)


def test_fused_hop_checks_on_the_device_and_forgets_the_hop(harness):
  indptr, indices = torch.tensor([0, 2, 3, 3, 4]), torch.tensor([1, 2, 3, 0])
  inducer = harness.Inducer(1)

  def seeded():
    inducer.init_nodes([torch.tensor([0, 1])])
    return inducer

  with pytest.raises(ValueError, match='source node 2 was not seen'):
    one_hop(seeded(), torch.tensor([0, 2]), indptr, indices)
  assert inducer.local_ids(0, torch.tensor([0, 1])).tolist() == [-1, -1]  # forgotten
  with pytest.raises(ValueError, match=r'srcs holds ids outside \[0, 4\): 7'):
    one_hop(seeded(), torch.tensor([0, 7]), indptr, indices)
  with pytest.raises(ValueError, match='indices holds a negative id: -5'):
    one_hop(seeded(), torch.tensor([0, 1]), indptr, torch.tensor([1, -5, 3, 0]))
  with pytest.raises(ValueError, match='indptr gives row 1 entries outside indices'):
    one_hop(seeded(), torch.tensor([1]), torch.tensor([0, 2, 9, 9, 9]), indices)
  with pytest.raises(ValueError, match='edge_times or seed_times but not both'):
    one_hop(seeded(), torch.tensor([0]), indptr, indices, edge_times=[torch.zeros(4)])
  with pytest.raises(ValueError, match='edge_time must be int64 or float64'):
    one_hop(seeded(), torch.tensor([0]), indptr, indices, edge_times=[torch.zeros(4)],
            seed_times=[torch.zeros(1)])  # fmt: skip
  with pytest.raises(ValueError, match='one entry per request'):
    one_hop(seeded(), torch.tensor([0]), indptr, indices, fanouts=[2, 2])
  with pytest.raises(ValueError, match='fanouts must be -1'):
    one_hop(seeded(), torch.tensor([0]), indptr, indices, fanouts=[-3])
  with pytest.raises(ValueError, match=r'seeds holds ids outside \[0, \d+\): min -4'):
    inducer.init_nodes([torch.tensor([3, -4])])
  new, rows, cols, nbrs, nums, _, _ = one_hop(seeded(), torch.tensor([0, 1]), indptr, indices)
  assert (nums[0].tolist(), nbrs[0].tolist(), new[0].tolist()) == ([2, 1], [1, 2, 3], [2, 3])
  assert (rows[0].tolist(), cols[0].tolist()) == ([0, 0, 1], [1, 2, 3])


def test_a_refused_request_forgets_the_requests_added_before_it(harness):
  indptr, indices = torch.tensor([0, 2, 3, 3, 4]), torch.tensor([1, 2, 3, 0])
  inducer = harness.Inducer(1)
  inducer.init_nodes([torch.tensor([0, 1])])
  empty = torch.empty(0, dtype=torch.long)
  with pytest.raises(ValueError, match='edge_times or seed_times but not both'):
    inducer.sample_induce_next(
      src_types=[0, 0], nbr_types=[0, 0], replace=False,
      srcs=[torch.tensor([0]), torch.tensor([1])], indptrs=[indptr] * 2, indices=[indices] * 2,
      edge_ids=[None] * 2, edge_weights=[None] * 2, fanouts=[2, 2], rng_seeds=[1, 2],
      row_prefixes=[empty] * 2, col_prefixes=[empty] * 2,
      edge_times=[None, torch.zeros(4, dtype=torch.long)], seed_times=[None, None],
    )  # fmt: skip
  assert inducer.local_ids(0, torch.tensor([0, 1, 2])).tolist() == [-1, -1, -1]


def timed(graph, seed, dtype):
  """Each topology's edge times, sorted within each row (as a time-sorted
  topology's are), and each row's latest time."""
  g = torch.Generator().manual_seed(seed)
  times = {}
  for e, (indptr, indices, *_) in graph.items():
    t = torch.randint(0, 100, (indices.numel(),), generator=g).to(dtype)
    for r in range(indptr.numel() - 1):
      lo, hi = int(indptr[r]), int(indptr[r + 1])
      t[lo:hi] = t[lo:hi].sort().values
    ends = (indptr[1:] - 1).clamp(min=0).long()
    row_max = torch.where(indptr[1:] > indptr[:-1], t[ends], torch.zeros((), dtype=dtype))
    times[e] = (t, row_max)
  return times


BITS = 9  # disjoint keys' id bits: every node id here fits


def keyed(ids, subgraphs):
  """Disjoint sampling's keys: each id in its subgraph's bits above BITS."""
  return (subgraphs << BITS) | ids


def run_windowed_hops(fused, harness, graph, times, fanouts, last, with_row_max, bits, seed):
  """Seeds of each type (at random times with ``times``; keyed into
  subgraphs of their own with ``bits``), then hops over every edge type:
  ``sample_induce_next`` with the times and keys (``fused``), or the
  kernels' sample_neighbors(_temporal) and disjoint_keys, then induce_next."""
  inducer = harness.Inducer(2, bits)
  g = torch.Generator().manual_seed(seed)
  seeds = [torch.randint(0, NUM_NODES[t], (9,), generator=g) for t in (0, 1)]
  if bits:
    seeds = [keyed(s, torch.arange(s.numel())) for s in seeds]
  # keyed seeds are distinct: the fused run adds them as the engine does
  frontier = inducer.init_nodes(seeds, distinct=fused and bits > 0)
  answers = [frontier]
  for i, fanout in enumerate(fanouts):
    etypes = [e for e in graph if frontier[e[0]].numel() > 0]
    srcs = [frontier[s] for s, _ in etypes]
    ids = [src & ((1 << BITS) - 1) if bits else src for src in srcs]
    stamps = [times[e][0] if times else None for e in etypes]
    seed_times = [torch.randint(0, 100, (f.numel(),), generator=g).to(st.dtype) if times else None
                  for f, st in zip(srcs, stamps)]  # fmt: skip
    row_max = [times[e][1] if times and with_row_max else None for e in etypes]
    rng_seeds = [100 * i + j for j in range(len(etypes))]
    if fused:
      out = inducer.sample_induce_next(
        src_types=[s for s, _ in etypes], nbr_types=[d for _, d in etypes], srcs=srcs,
        indptrs=[graph[e][0] for e in etypes], indices=[graph[e][1] for e in etypes],
        edge_ids=[graph[e][2] for e in etypes], edge_weights=[None] * len(etypes),
        fanouts=[fanout] * len(etypes), replace=False, rng_seeds=rng_seeds,
        row_prefixes=[torch.empty(0, dtype=torch.long)] * len(etypes),
        col_prefixes=[torch.empty(0, dtype=torch.long)] * len(etypes),
        edge_times=stamps, seed_times=seed_times, last=last, row_max_times=row_max,
      )  # fmt: skip
      new, rows, cols, nbrs, nums, eids, new_on_host = out
      assert new_on_host == []  # (without fresh_on_host)
    else:
      draws = []
      for e, src, st, t, rm, rng in zip(etypes, ids, stamps, seed_times, row_max, rng_seeds):
        indptr, indices, eid = graph[e][:3]
        if times:
          draws.append(harness.sample_neighbors_temporal(
            indptr, indices, eid, None, st, src, t, fanout, False, last, rng, rm))  # fmt: skip
        else:
          draws.append(
            harness.sample_neighbors(indptr, indices, eid, None, src, fanout, False, rng)
          )
      nbrs, nums, eids = ([d[k] for d in draws] for k in range(3))
      inserted = nbrs
      if bits:
        inserted = [harness.disjoint_keys(s, n, c, bits) for s, n, c in zip(srcs, nbrs, nums)]
      new, rows, cols = inducer.induce_next(
        [s for s, _ in etypes], [d for _, d in etypes], srcs, inserted, nums
      )
    answers.append([new, rows, cols, nbrs, nums, eids])
    frontier = new
  return answers


@pytest.mark.parametrize('kind', ['temporal', 'disjoint', 'temporal disjoint'])
@pytest.mark.parametrize('dtype', [torch.int64, torch.float64])
@pytest.mark.parametrize('fanouts', [[3, 2], [2, -1]])
@pytest.mark.parametrize('last', [False, True])
@pytest.mark.parametrize('with_row_max', [False, True])
def test_fused_windowed_and_keyed_hops_equal_the_ops(harness, threads, kind, dtype, fanouts, last,
                                                     with_row_max):  # fmt: skip
  """Hops drawn and added at once with times (each seed in its window: its
  time's, the latest of it with ``last``) and disjoint keys (each neighbor
  in its seed's subgraph), as the temporal and disjoint_keys ops give them."""
  if kind == 'disjoint' and (dtype != torch.int64 or last or with_row_max):
    pytest.skip('no times: one case')
  graph = hetero_graph(2, 8, torch.int64, False)
  times = timed(graph, 9, dtype) if 'temporal' in kind else None
  bits = BITS if 'disjoint' in kind else 0
  args = (harness, graph, times, fanouts, last, with_row_max, bits, 10)
  fused = run_windowed_hops(True, *args)
  assert flat(fused) == flat(run_windowed_hops(False, *args))
  assert sum(n.numel() for hop in fused[1:] for n in hop[3]) > 0
  if bits:  # the subgraphs keep apart: a node met by two seeds is two nodes
    first = fused[1][0][0]
    assert (first >> BITS).unique().numel() > 1
