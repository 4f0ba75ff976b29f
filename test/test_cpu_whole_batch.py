"""The CPU Inducer's whole batch (``Inducer.sample_batch``): every hop drawn
and added in one call, as the GPU's is. Its batches must equal those the
engine drives hop by hop with the same inducer (``sample_induce_next``,
itself checked against ``sample_neighbors`` then ``induce_next``), at any
thread count, the random stream standing where the hop-by-hop run leaves
it; the CPU sampler must take that one call a batch; bad input is named
and leaves the inducer usable."""

import pytest
import torch
from conftest import random_edges
from test_sample_induce import EDGE_TYPES, NUM_NODES, graph, one_pass_hop
from test_whole_batch import (
  HETERO_CASES,
  HOMO_CASES,
  PlanCounter,
  assert_same_batch,
  check_hetero_batches,
  check_homo_batches,
  inducer_sampler,
  sample_both,
  weighted_dataset,
)

from graphlearn_torch._ext import ops
from graphlearn_torch.data import Dataset
from graphlearn_torch.sampler import NodeSamplerInput


@HOMO_CASES
def test_homo_batches_equal_the_hop_by_hop_engine(torch_threads, with_edge, replace, fanouts):
  check_homo_batches(None, with_edge, replace, fanouts)


@HETERO_CASES
def test_hetero_batches_equal_the_hop_by_hop_engine(torch_threads, fanouts):
  check_hetero_batches(None, fanouts)


def test_weighted_batches_equal_the_hop_by_hop_engine():
  ds = weighted_dataset()
  for replace in (False, True):
    outs = sample_both(
      None, ds, [3, 3], [torch.tensor([0, 8, 9])], with_weight=True, replace=replace
    )
    assert_same_batch(*outs[0])


def test_a_frontier_that_comes_out_empty_takes_no_random_key():
  # Papers no paper cites: hop 1 meets no new paper, so hop 2's 'writes'
  # request has no seeds: it neither draws nor takes a kernel seed.
  edges = {
    ('author', 'writes', 'paper'): random_edges(25, 40, 150, seed=0),
    ('paper', 'cites', 'paper'): random_edges(40, 20, 100, seed=1),  # papers 20+ uncited
  }
  ds = Dataset(edge_dir='in')
  ds.init_graph(edges, graph_mode='CPU', num_nodes={'paper': 40, 'author': 25})
  counts = []
  whole = inducer_sampler(None, ds, {et: [2, 2] for et in edges}, True, with_edge=True)
  make = whole.engine.create_inducer
  whole.engine.create_inducer = lambda: PlanCounter(make(), counts)
  hops = inducer_sampler(None, ds, {et: [2, 2] for et in edges}, False, with_edge=True)
  for seeds in (torch.arange(20, 22), torch.tensor([39]), torch.tensor([0, 1, 2])):
    inputs = NodeSamplerInput(seeds, 'paper')
    assert_same_batch(whole.sample_from_nodes(inputs), hops.sample_from_nodes(inputs))
  assert any(drawn < planned for planned, drawn in counts), counts
  assert len(counts) == 3  # one call a batch
  assert whole.random.kernel_seed() == hops.random.kernel_seed()


def batch_plan(inducer, topos, num_hops, fanout, flags, num_partitions=1):
  """A BatchPlan of ``num_hops`` hops over test_sample_induce's graph (two
  node types, three edge types), every edge type every hop."""
  with_edge, with_weight, replace = flags
  requests = [(h, e) for h in range(num_hops) for e in range(len(EDGE_TYPES))]
  extra = {}
  if num_partitions > 1:
    books = [torch.zeros(n, dtype=torch.long) for n in NUM_NODES]
    extra = dict(num_partitions=num_partitions, books=books)
  repeat = num_partitions
  return inducer.BatchPlan(
    num_nodes=NUM_NODES,
    num_hops=num_hops,
    num_edge_types=len(EDGE_TYPES),
    hops=[h for h, _ in requests],
    edge_types=[e for _, e in requests],
    src_types=[EDGE_TYPES[e][0] for _, e in requests],
    nbr_types=[EDGE_TYPES[e][1] for _, e in requests],
    indptrs=[topos[e][0] for _, e in requests for _ in range(repeat)],
    indices=[topos[e][1] for _, e in requests for _ in range(repeat)],
    edge_ids=[topos[e][2] if with_edge else None for _, e in requests for _ in range(repeat)],
    edge_weights=[topos[e][3] if with_weight else None for _, e in requests for _ in range(repeat)],
    fanouts=[fanout] * len(requests),
    replace=replace,
    **extra,
  )


@pytest.mark.parametrize('flags', [(False, False, False), (True, False, False), (True, True, True)])
def test_a_large_batch_is_its_hops_one_by_one(torch_threads, flags):
  # 3,000 seeds a type, fanout 10 then 10: the second hop's draws pass the
  # parallel insert's threshold at 4 threads.
  topos = graph()
  whole, hop_by_hop = ops.Inducer(2, NUM_NODES), ops.Inducer(2, NUM_NODES)
  g = torch.Generator().manual_seed(2)
  seeds = [torch.randint(0, n, (3_000,), generator=g) for n in NUM_NODES]
  keys = list(range(11, 11 + 2 * len(EDGE_TYPES)))
  plan = batch_plan(whole, topos, 2, 10, flags)
  nodes, rows, cols, eids, seed_locals, counts = whole.sample_batch(
    plan=plan, seeds=seeds, rng_seeds=keys
  )
  frontier = hop_by_hop.init_nodes(seeds)
  marks = [[f.numel()] for f in frontier]
  prefixes = [[torch.empty(0, dtype=torch.long) for _ in EDGE_TYPES] for _ in range(2)]
  edge_ids = [[] for _ in EDGE_TYPES]
  totals = []
  with_edge = flags[0]
  for hop in range(2):
    hop_keys = keys[hop * len(EDGE_TYPES) : (hop + 1) * len(EDGE_TYPES)]
    new, hop_rows, hop_cols, _, _, hop_eids, _ = one_pass_hop(
      hop_by_hop, topos, frontier, 10, hop_keys, flags, prefixes
    )
    totals += [r.numel() - p.numel() for r, p in zip(hop_rows, prefixes[0])]
    prefixes = [hop_rows, hop_cols]
    for e, part in enumerate(hop_eids):
      edge_ids[e].append(part)
    for t, f in enumerate(new):
      marks[t].append(marks[t][-1] + f.numel())
    frontier = new
  assert max(r.numel() for r in rows) > 32768
  for t, seed in enumerate(seeds):
    assert torch.equal(nodes[t][seed_locals[t]], seed)
    assert nodes[t].numel() == marks[t][-1]
  for e in range(len(EDGE_TYPES)):
    assert torch.equal(rows[e], prefixes[0][e]) and torch.equal(cols[e], prefixes[1][e])
    assert torch.equal(eids[e], torch.cat(edge_ids[e]) if with_edge else torch.empty(0))
  assert counts.tolist() == [m for type_marks in marks for m in type_marks] + totals + [6]


def test_bad_batches_are_named_and_leave_the_inducer_usable():
  topos = graph()
  inducer = ops.Inducer(2, NUM_NODES)
  plan = batch_plan(inducer, topos, 2, 3, (False, False, False))
  keys = list(range(6))
  good = [torch.tensor([1, 2]), torch.tensor([3])]
  with pytest.raises(ValueError, match='seeds hold node id 6000, outside the 6000 nodes'):
    inducer.sample_batch(plan=plan, seeds=[torch.tensor([1, 6_000]), good[1]], rng_seeds=keys)
  with pytest.raises(ValueError, match='seeds hold node id -1'):
    inducer.sample_batch(plan=plan, seeds=[good[0], torch.tensor([-1])], rng_seeds=keys)
  with pytest.raises(ValueError, match='needs 6 random keys, got 5'):
    inducer.sample_batch(plan=plan, seeds=good, rng_seeds=keys[:5])
  with pytest.raises(ValueError, match=r'one node count per node type \(1\), got 2'):
    inducer.sample_batch(plan=plan, seeds=good[:1], rng_seeds=keys)
  corrupt = [(indptr, torch.full_like(indices, 7_000), e, w) for indptr, indices, e, w in topos]
  bad_plan = batch_plan(inducer, corrupt, 2, 3, (False, False, False))
  with pytest.raises(ValueError, match='node id 7000 is out of range for'):
    inducer.sample_batch(plan=bad_plan, seeds=good, rng_seeds=keys)
  two_parts = batch_plan(inducer, topos, 2, 3, (False, False, False), num_partitions=2)
  with pytest.raises(ValueError, match="a host's partitions are drawn a batch at once on a GPU"):
    inducer.sample_batch(plan=two_parts, seeds=good, rng_seeds=keys * 2)
  disjoint = ops.Inducer(2, [], 20)
  with pytest.raises(ValueError, match='disjoint keys draws a batch hop by hop'):
    disjoint.sample_batch(plan=plan, seeds=good, rng_seeds=keys)
  nodes, *_ = inducer.sample_batch(plan=plan, seeds=good, rng_seeds=keys)  # usable
  assert nodes[0][:2].tolist() == [1, 2] and nodes[1][:1].tolist() == [3]
