"""A distributed hop's pieces in one pass of the device inducer
(kernels/hop_pieces.h: seeds drawn from the partitions held here, each with
its partition's key and its rank among that partition's seeds, beside the
neighbors peers gave for the others), run on the CPU through the host
harness, against each partition's seeds drawn apart by the same kernels'
sample_neighbors, stitched in seed order with the given neighbors, then
added by induce_next: the same hop exactly. End to end, the distributed
sampler's hops answered by hop_pieces (the partitions held here drawn by
the inducer, the others' answers given) give the batches of its
partitioned hop-by-hop driver."""

import asyncio

import pytest
import torch
from test_kernel_bodies import csr, flat
from test_neighbor_sampler import make_hetero, make_homo
from test_partitioned_batch import (
  assert_like_hop_by_hop,
  assert_same_result,
  both_engines,
  hop_by_hop,
  host_partitions,
)
from test_whole_batch import weighted_dataset

from graphlearn_torch._ext import ops
from graphlearn_torch.distributed.sampling.peer_requests import OwnersAsked, hop_pieces
from graphlearn_torch.sampler.base import NeighborOutput
from graphlearn_torch.sampler.hops import HopRequest
from graphlearn_torch.sampler.inducer_draws import distinct_in_order, pieces_and_induce
from graphlearn_torch.sampler.schema import RandomStream, mix_seed

# Builds the host harness: left out of make test-fast.
pytestmark = pytest.mark.slow

NUM_NODES = 200


def given_neighbors(num_seeds, fanout, g, with_edge=True):
  """Neighbors a peer gave: at most ``fanout`` a seed, as a CSR by seed index."""
  counts = torch.randint(0, fanout + 1, (num_seeds,), generator=g)
  nbrs = torch.randint(0, NUM_NODES, (int(counts.sum()),), generator=g)
  eids = torch.randint(0, 10_000, (nbrs.numel(),), generator=g) if with_edge else None
  indptr = torch.zeros(num_seeds + 1, dtype=torch.long)
  indptr[1:] = counts.cumsum(0)
  return indptr, nbrs, eids


def hop_request(seeds, topologies, part, given, fanout, replace, keys, prefixes):
  """sample_induce_next's arguments for one hop of ``seeds`` over
  ``topologies`` (the first the request's own) and the ``given`` CSR."""
  (indptr, indices, eids, weights), *more = topologies
  weighted = weights is not None
  pieces = dict(
    indptrs=[t[0] for t in more] + [given[0]],
    indices=[t[1] for t in more] + [given[1]],
    edge_ids=[t[2] for t in more] + [given[2]],
    edge_weights=[t[3] if weighted else None for t in more] + [None],
    rng_seeds=keys[1:],
    part=part,
    given=True,
  )
  return dict(
    src_types=[0], nbr_types=[0], srcs=[seeds], indptrs=[indptr], indices=[indices],
    edge_ids=[eids], edge_weights=[weights], fanouts=[fanout], replace=replace,
    rng_seeds=keys[:1], row_prefixes=[prefixes[0]], col_prefixes=[prefixes[1]],
    pieces=[pieces], fresh_on_host=True,
  )  # fmt: skip


def stitched(harness, seeds, topologies, part, given, fanout, replace, keys):
  """The hop drawn a topology at a time and stitched in seed order."""
  runs = {}
  for k, (indptr, indices, eids, weights) in enumerate(topologies):
    mine = (part == k).nonzero().flatten()
    nbr, num, eid = harness.sample_neighbors(
      indptr, indices, eids, weights, seeds[mine], fanout, replace, keys[k]
    )
    starts = torch.cumsum(num, 0) - num
    for j, i in enumerate(mine.tolist()):
      runs[i] = (nbr[starts[j] : starts[j] + num[j]], eid[starts[j] : starts[j] + num[j]])
  indptr, nbrs, eids = given
  for i in (part == len(topologies)).nonzero().flatten().tolist():
    runs[i] = (nbrs[indptr[i] : indptr[i + 1]], eids[indptr[i] : indptr[i + 1]])
  order = [runs[i] for i in range(seeds.numel())]
  num = torch.tensor([r[0].numel() for r in order], dtype=torch.long)
  empty = torch.empty(0, dtype=torch.long)
  return torch.cat([empty] + [r[0] for r in order]), num, torch.cat([empty] + [r[1] for r in order])


def run_hops(harness, by_pieces, dtype, fanouts, replace, weighted, seed):
  """Two hops over 2 held partitions and a peer's given neighbors, in one
  pass each (``by_pieces``) or drawn apart, stitched and induced."""
  g = torch.Generator().manual_seed(seed)
  topologies = [csr(NUM_NODES, NUM_NODES, 8 * NUM_NODES, seed + k, dtype, weighted) for k in (0, 1)]
  inducer = harness.Inducer(1)
  frontier = inducer.init_nodes([torch.randint(0, NUM_NODES, (12,), generator=g)])[0]
  rows = cols = torch.empty(0, dtype=torch.long)
  answers = [frontier]
  for hop, fanout in enumerate(fanouts):
    part = torch.randint(0, 3, (frontier.numel(),), generator=g, dtype=torch.int32)
    given = given_neighbors(frontier.numel(), fanout, g)
    given = (given[0].to(dtype), given[1].to(dtype), given[2])
    keys = [50 * hop + k for k in range(3)]
    if by_pieces:
      request = hop_request(frontier, topologies, part, given, fanout, replace, keys, (rows, cols))
      new, rows_out, cols_out, nbrs, nums, eids, new_on_host = inducer.sample_induce_next(**request)
      assert all(torch.equal(a, b) for a, b in zip(new, new_on_host, strict=True))
      out = (new[0], nbrs[0], nums[0], eids[0])
      rows, cols = rows_out[0], cols_out[0]
    else:
      nbr, num, eid = stitched(harness, frontier, topologies, part, given, fanout, replace, keys)
      new, r, c = inducer.induce_next([0], [0], [frontier], [nbr.long()], [num])
      out = (new[0], nbr.long(), num, eid)
      rows, cols = torch.cat([rows, r[0]]), torch.cat([cols, c[0]])
    answers += [*out, rows, cols]
    frontier = new[0]
  return answers


@pytest.mark.parametrize('dtype', [torch.int64, torch.int32])
@pytest.mark.parametrize(
  'fanouts,replace,weighted',
  [([4, 3], False, False), ([3, 2], True, False), ([4, 2], False, True), ([0, 3], False, False)],
)  # fmt: skip
def test_a_hop_of_pieces_is_the_partitions_drawn_apart_and_stitched(
  harness, dtype, fanouts, replace, weighted
):
  args = (harness, dtype, fanouts, replace, weighted, 7)
  assert flat(run_hops(*args[:1], True, *args[1:])) == flat(run_hops(*args[:1], False, *args[1:]))


def pieces_hop(harness, inducer=None, **change):
  """One hop of 3 seeds: seed 1 given [5, 6], the others drawn from a
  4-node topology (fanout 2); ``change`` replaces pieces' entries."""
  indptr, indices = torch.tensor([0, 2, 3, 3, 4]), torch.tensor([1, 2, 3, 0])
  inducer = inducer or harness.Inducer(1)
  seeds = inducer.init_nodes([torch.tensor([0, 1, 3])])[0]
  pieces = dict(
    indptrs=[torch.tensor([0, 0, 2, 2])], indices=[torch.tensor([5, 6])], edge_ids=[None],
    edge_weights=[None], rng_seeds=[9], part=torch.tensor([0, 1, 0], dtype=torch.int32),
    given=True,
  )  # fmt: skip
  pieces.update(change)
  empty = torch.empty(0, dtype=torch.long)
  return inducer.sample_induce_next(
    src_types=[0], nbr_types=[0], srcs=[seeds], indptrs=[indptr], indices=[indices],
    edge_ids=[None], edge_weights=[None], fanouts=[2], replace=False, rng_seeds=[1],
    row_prefixes=[empty], col_prefixes=[empty], pieces=[pieces],
  )  # fmt: skip


def test_pieces_take_the_given_neighbors_in_seed_order(harness):
  new, rows, cols, nbrs, nums, _, _ = pieces_hop(harness)
  assert nums[0].tolist() == [2, 2, 1]
  assert nbrs[0].tolist() == [1, 2, 5, 6, 0]
  assert new[0].tolist() == [2, 5, 6]
  assert (rows[0].tolist(), cols[0].tolist()) == ([0, 0, 1, 1, 2], [1, 3, 4, 5, 0])


def test_bad_pieces_are_named_and_the_hop_forgotten(harness):
  inducer = harness.Inducer(1)
  with pytest.raises(ValueError, match='part gives seed 2 topology 5, outside its 2'):
    pieces_hop(harness, inducer, part=torch.tensor([0, 1, 5], dtype=torch.int32))
  assert inducer.local_ids(0, torch.tensor([0, 1, 3])).tolist() == [-1, -1, -1]  # forgotten
  with pytest.raises(ValueError, match='given neighbors of seed 1 are more than its fanout'):
    pieces_hop(harness, indptrs=[torch.tensor([0, 0, 3, 3])], indices=[torch.tensor([5, 6, 7])])
  with pytest.raises(ValueError, match='topology 1 holds node id -6'):
    pieces_hop(harness, indices=[torch.tensor([5, -6])])
  with pytest.raises(ValueError, match='given neighbors have 2 rows for its 3 seeds'):
    pieces_hop(harness, indptrs=[torch.tensor([0, 0, 2])])
  with pytest.raises(ValueError, match='int32 per seed'):
    pieces_hop(harness, part=torch.tensor([0, 1, 0]))
  with pytest.raises(ValueError, match='as many indices'):
    pieces_hop(harness, rng_seeds=[])
  with pytest.raises(ValueError, match='must all have weights or none'):
    pieces_hop(harness, edge_weights=[torch.ones(2)])


def test_the_cpu_inducer_refuses_pieces():
  inducer = ops.Inducer(1, [4])
  inducer.init_nodes([torch.tensor([0])])
  empty = torch.empty(0, dtype=torch.long)
  pieces = dict(indptrs=[], indices=[], edge_ids=[], edge_weights=[], rng_seeds=[],
                part=torch.zeros(1, dtype=torch.int32))  # fmt: skip
  with pytest.raises(ValueError, match='the CPU Inducer draws each request from its one'):
    inducer.sample_induce_next(
      src_types=[0], nbr_types=[0], srcs=[torch.tensor([0])], indptrs=[torch.tensor([0, 1])],
      indices=[torch.tensor([0])], edge_ids=[None], edge_weights=[None], fanouts=[1],
      replace=False, rng_seeds=[1], row_prefixes=[empty], col_prefixes=[empty], pieces=[pieces],
    )  # fmt: skip


# -- the distributed sampler's hop of pieces, end to end ---------------------------


class HeldHere:
  """What ``hop_pieces`` asks of a PartitionService: the partitions ``here``
  run in this process (the first its own); the others answer, over a
  future as RPC would, with the harness's draws of their topologies (the
  device's kernel body) with their kernel seeds."""

  def __init__(self, harness, parts, here, with_edge=False, with_weight=False):
    self.harness, self.parts, self.here = harness, parts, here
    self.partition_idx = here[0]
    self.sampling_callee = 'one hop'
    self.with_weight = with_weight

  def topology(self, etype, p):
    return self.parts.topologies[p][etype]

  def ask_owners(self, ntype, tensors, callee, fanout, etype, with_edge, with_weight, hop_seed):
    (seeds,) = tensors
    owner = self.parts.books[ntype][seeds].long()
    positions = [(owner == p).nonzero().flatten() for p in range(self.parts.num_partitions)]
    owners = [p for p, pos in enumerate(positions) if pos.numel()]
    asked = OwnersAsked(positions, [(seeds[pos],) for pos in positions], [])
    asked.here = [p for p in owners if p in self.here]
    for p in (p for p in owners if p not in self.here):
      t = self.topology(etype, p)
      nbr, num, eid = self.harness.sample_neighbors(
        t.indptr, t.indices, t.edge_ids if with_edge else None,
        t.edge_weights if with_weight else None, seeds[positions[p]], fanout, False,
        mix_seed(hop_seed, p),
      )  # fmt: skip
      answer = asyncio.get_running_loop().create_future()
      answer.set_result(NeighborOutput(nbr, num, eid if with_edge else None))
      asked.away.append((p, f'worker {p}', answer))
    return asked


def by_pieces(harness, engine, service, seed_dict, random, with_edge=False, with_weight=False):
  """The batch as the distributed sampler on a GPU draws it: each hop's
  kernel seeds in request order, each request answered by ``hop_pieces``
  and drawn by the inducer."""

  async def batch():
    inducer = harness.Inducer(len(engine.schema.node_types))
    steps = engine.sample_steps(seed_dict, inducer)
    try:
      requests = next(steps)
      while True:
        outs = []
        for r, k in zip(requests, random.kernel_seeds(len(requests))):
          seed_type = engine.schema.seed_type(r.etype)
          args = (seed_type, r.seeds, r.fanout, r.etype, with_edge, with_weight, k)
          outs.append(await hop_pieces(service, *args))
        requests = steps.send(outs)
    except StopIteration as done:
      return done.value

  return asyncio.run(batch())


@pytest.mark.parametrize('here', [[0], [1], [0, 2], [2, 0, 1]])
@pytest.mark.parametrize('with_edge', [False, True])
def test_hops_of_pieces_equal_the_partitioned_hop_by_hop_driver(harness, here, with_edge):
  ds, _ = make_homo('in', num_nodes=60, num_edges=500, seed=3)
  whole, hops = both_engines(harness, ds, [4, 3, 2], with_edge=with_edge)
  parts = host_partitions(whole, 3)
  ntype = whole.schema.node_types[0]
  service = HeldHere(harness, parts, here)
  seeds = [torch.tensor([1, 5, 5, 17]), torch.tensor([59]), torch.arange(60)]

  def drawn(seed_dict, random):
    return by_pieces(harness, whole.engine, service, seed_dict, random, with_edge)

  assert_like_hop_by_hop(harness, drawn, hops, parts, [{ntype: s} for s in seeds], with_edge)


def test_weighted_and_hetero_hops_of_pieces_equal_the_partitioned_driver(harness):
  whole, hops = both_engines(harness, weighted_dataset(), [3, 3], with_weight=True)
  parts = host_partitions(whole, 2, seed=5)
  seeds = {whole.schema.node_types[0]: torch.tensor([0, 8, 9, 21])}
  service = HeldHere(harness, parts, [1])
  res = by_pieces(harness, whole.engine, service, seeds, RandomStream(3), with_weight=True)
  expected = hop_by_hop(harness, hops.engine, seeds, parts, RandomStream(3), with_weight=True)
  assert_same_result(res, expected)
  ds, _ = make_hetero('in')
  skip_a_hop = {
    ('author', 'writes', 'paper'): [3, 0, 2],
    ('paper', 'cites', 'paper'): [2, 2, 0],
    ('author', 'affiliated', 'inst'): [0, 4, 1],
  }
  whole, hops = both_engines(harness, ds, skip_a_hop, with_edge=True)
  parts = host_partitions(whole, 3, seed=2)
  service = HeldHere(harness, parts, [2, 0])
  seeds = [{'paper': torch.tensor([2, 9, 9, 30])}, {'paper': torch.arange(40)}]

  def drawn(seed_dict, random):
    return by_pieces(harness, whole.engine, service, seed_dict, random, True)

  assert_like_hop_by_hop(harness, drawn, hops, parts, seeds, True)


def test_seeds_on_the_host_are_kept_in_the_order_an_inducer_keeps_them(harness):
  ids = torch.tensor([5, 3, 5, 1, 3, 9, 0, 9])
  inducer = harness.Inducer(1)
  assert distinct_in_order(ids).tolist() == inducer.init_nodes([ids])[0].tolist() == [5, 3, 1, 9, 0]
  assert distinct_in_order(torch.empty(0, dtype=torch.long)).numel() == 0


def test_a_hop_answered_in_part_with_pieces_is_refused(harness):
  ds, _ = make_homo('in', num_nodes=30, num_edges=200, seed=5)
  whole, _ = both_engines(harness, ds, [3])
  schema = whole.schema
  ntype, etype = schema.node_types[0], schema.edge_types[0]
  service = HeldHere(harness, host_partitions(whole, 2), [0])
  seeds = torch.tensor([1, 2])
  piece = asyncio.run(hop_pieces(service, ntype, seeds, 3, etype, False, False, 1))
  drawn = NeighborOutput(torch.tensor([4]), torch.tensor([1, 0]))
  request = HopRequest(etype, seeds, 3)
  empty = {schema.out_edge_type(etype): torch.empty(0, dtype=torch.long)}
  with pytest.raises(ValueError, match='PieceDraws all or none'):
    pieces_and_induce(
      schema, harness.Inducer(1), [request] * 2, [seeds] * 2, [piece, drawn], empty, dict(empty)
    )
