"""The CPU inducer on hops large enough for its parallel id-indexed insert
(many chunks, claims racing between threads; it runs from 4 threads, its
one-pass insert below): the same answers as a sequential first-appearance
relabelling in Python, and as the hash-table inducer, at any thread count."""

import pytest
import torch

from graphlearn_torch._ext import ops

NUM_IDS = 30_000


def reference_hops(seeds, hops):
  """Sequential relabelling: a dict from id to local id, new ids in order of
  first appearance."""
  local = {}
  for s in seeds.tolist():
    local.setdefault(s, len(local))
  answers = [list(local)]
  for srcs, nbrs, nums in hops:
    before = len(local)
    rows = [local[s] for s, n in zip(srcs.tolist(), nums.tolist()) for _ in range(n)]
    cols = [local.setdefault(v, len(local)) for v in nbrs.tolist()]
    answers.append((list(local)[before:], rows, cols))
  return answers


def random_hops(seed, num_ids=NUM_IDS, num_seeds=500, num_hops=3):
  """Seeds, then hops, each from the nodes the last one added (up to 11
  neighbors each)."""
  g = torch.Generator().manual_seed(seed)
  seeds = torch.randint(0, num_ids, (num_seeds,), generator=g)
  frontier = list(dict.fromkeys(seeds.tolist()))
  hops, known = [], set(frontier)
  for _ in range(num_hops):
    srcs = torch.tensor(frontier)
    nums = torch.randint(0, 12, (srcs.numel(),), generator=g)
    nbrs = torch.randint(0, num_ids, (int(nums.sum()),), generator=g)
    hops.append((srcs, nbrs, nums))
    frontier = [v for v in dict.fromkeys(nbrs.tolist()) if v not in known]
    known.update(frontier)
  return seeds, hops


def run(inducer, seeds, hops, in_place=False):
  """Every answer of the inducer; with ``in_place``, the hops' local indices
  written into slices of larger buffers, as sample_steps passes them."""
  answers = [inducer.init_nodes([seeds])[0].tolist()]
  for srcs, nbrs, nums in hops:
    outs = {}
    if in_place:
      outs = {k: [torch.full((nbrs.numel() + 3,), -9)[2:-1]] for k in ('row_outs', 'col_outs')}
    new, rows, cols = inducer.induce_next([0], [0], [srcs], [nbrs], [nums], **outs)
    if in_place:
      assert rows[0].data_ptr() == outs['row_outs'][0].data_ptr()
      assert cols[0].data_ptr() == outs['col_outs'][0].data_ptr()
    answers.append((new[0].tolist(), rows[0].tolist(), cols[0].tolist()))
  return answers


@pytest.mark.parametrize('seed', [0, 1])
def test_parallel_insert_relabels_as_a_sequential_one(torch_threads, seed):
  seeds, hops = random_hops(seed)
  # several chunks, above kMinParallelPositions
  assert max(nbrs.numel() for _, nbrs, _ in hops) > 3 * 4096
  expected = reference_hops(seeds, hops)
  dense = ops.Inducer(1, [NUM_IDS])
  for _ in range(2):  # the second batch runs on the reset map
    assert run(dense, seeds, hops) == expected
  assert run(dense, seeds, hops, in_place=True) == expected
  assert run(ops.Inducer(1, []), seeds, hops) == expected
  assert run(ops.Inducer(1, []), seeds, hops, in_place=True) == expected
  known = torch.tensor(expected[0] + expected[1][0])
  assert dense.local_ids(0, known).tolist() == list(range(known.numel()))


def test_small_and_large_batches_reuse_one_map(torch_threads):
  # A batch that used few of the ids resets them one by one, one that used
  # many refills the map: either way the next batch starts from empty.
  nbrs = torch.randint(0, NUM_IDS, (20,), generator=torch.Generator().manual_seed(3))
  small = (torch.tensor([3, 3, 7]), [(torch.tensor([3, 7]), nbrs, torch.tensor([12, 8]))])
  large = random_hops(4)
  dense = ops.Inducer(1, [NUM_IDS])
  for seeds, hops in [small, large, large, small, small]:
    assert run(dense, seeds, hops) == reference_hops(seeds, hops)


def test_thousands_of_batches_on_one_map_start_from_empty():
  # A reset writes nothing into an id-indexed map: it moves the floor its
  # entries count from past the batch and a headroom for a parallel hop's
  # claims (about a million). Some 4,000 batches use up int32's range, and
  # the map is refilled on the way.
  inducer = ops.Inducer(1, [NUM_IDS])
  g = torch.Generator().manual_seed(5)
  for _ in range(4_500):
    seeds = torch.randint(0, NUM_IDS, (3,), generator=g)
    hops = [(seeds[:1], torch.randint(0, NUM_IDS, (4,), generator=g), torch.tensor([4]))]
    assert run(inducer, seeds, hops) == reference_hops(seeds, hops)


def test_a_hop_with_more_claims_than_the_headroom_keeps_its_batch(torch_threads):
  # A parallel hop of more positions than the map keeps room for claims
  # (about a million) moves the batch's entries to a new floor first.
  num_ids = 4_000_000
  seeds, hops = random_hops(7, num_ids=num_ids, num_seeds=40_000, num_hops=2)
  assert hops[-1][1].numel() > 1 << 20
  inducer = ops.Inducer(1, [num_ids])
  small = random_hops(8, num_ids=num_ids, num_seeds=50, num_hops=1)
  for batch_seeds, batch_hops in [small, (seeds, hops), small, (seeds, hops)]:
    assert run(inducer, batch_seeds, batch_hops) == reference_hops(batch_seeds, batch_hops)


def test_nodes_handed_out_outlive_later_batches():
  # A batch's nodes are views of the inducer's log of ids, not copies: held,
  # they keep their values while later batches log theirs elsewhere, and
  # changing them changes no later batch.
  inducer = ops.Inducer(1, [NUM_IDS])
  seeds, hops = random_hops(9)
  expected = reference_hops(seeds, hops)
  held = [inducer.init_nodes([seeds])[0]]
  for srcs, nbrs, nums in hops:
    held.append(inducer.induce_next([0], [0], [srcs], [nbrs], [nums])[0][0])
  other_seeds, other_hops = random_hops(10, num_seeds=300)  # fits in the first's memory
  for _ in range(2):
    assert run(inducer, other_seeds, other_hops) == reference_hops(other_seeds, other_hops)
    assert [t.tolist() for t in held] == [expected[0]] + [new for new, _, _ in expected[1:]]
  for t in held:
    t.fill_(0)
  assert run(inducer, seeds, hops) == expected


def test_nodes_sent_to_another_process_are_not_written_again():
  # torch.multiprocessing moves a tensor it sends into shared memory, which
  # the receiver maps (counted nowhere here): the inducer's next batch logs
  # its ids elsewhere, though the sender holds the tensor no more.
  inducer = ops.Inducer(1, [NUM_IDS])
  ids = torch.randperm(NUM_IDS, generator=torch.Generator().manual_seed(11))
  nodes = inducer.init_nodes([ids[:5000]])[0]  # the whole log
  fd, size = nodes.untyped_storage()._share_fd_cpu_()  # as a multiprocessing queue does
  received = torch.UntypedStorage._new_shared_fd_cpu(fd, size)  # the receiver's mapping
  del nodes
  assert inducer.init_nodes([ids[5000:10000]])[0].tolist() == ids[5000:10000].tolist()
  in_receiver = torch.empty(0, dtype=torch.long).set_(received, 0, (5000,))
  assert in_receiver.tolist() == ids[:5000].tolist()


def test_an_id_out_of_range_is_named_and_leaves_the_map_usable(torch_threads):
  inducer = ops.Inducer(1, [NUM_IDS])
  inducer.init_nodes([torch.tensor([0])])
  nbrs = torch.arange(50_000) % NUM_IDS  # claims to leave behind, were it checked late
  nbrs[31_234] = NUM_IDS + 7
  with pytest.raises(ValueError, match=f'node id {NUM_IDS + 7} is out of range for {NUM_IDS}'):
    inducer.induce_next([0], [0], [torch.tensor([0])], [nbrs], [torch.tensor([50_000])])
  seeds, hops = random_hops(2)
  assert run(inducer, seeds, hops) == reference_hops(seeds, hops)


@pytest.mark.parametrize('dense', [True, False])
def test_an_unknown_or_negative_source_is_named(dense):
  inducer = ops.Inducer(1, [100] if dense else [])
  inducer.init_nodes([torch.tensor([0, 3])])
  for src in (5, -5, -(2**40), 2**40):
    with pytest.raises(ValueError, match=f'source node {src} was not seen by the inducer'):
      inducer.induce_next([0], [0], [torch.tensor([src])], [torch.tensor([1])], [torch.tensor([1])])


def test_seeds_changed_in_place_are_looked_up():
  # The nodes a hop added are known to hold consecutive local ids; once
  # changed in place, they are looked up like any other seeds.
  inducer = ops.Inducer(1, [NUM_IDS])
  added = inducer.init_nodes([torch.tensor([5, 9])])[0]
  _, rows, _ = inducer.induce_next(
    [0], [0], [added], [torch.tensor([7, 8])], [torch.ones(2, dtype=torch.long)]
  )
  assert rows[0].tolist() == [0, 1]
  new, _, _ = inducer.induce_next([0], [0], [added], [torch.tensor([3])], [torch.tensor([1, 0])])
  new = new[0]
  assert new.tolist() == [3]
  new.copy_(torch.tensor([7]))  # local id 2 in place of 3 (4)
  _, rows, _ = inducer.induce_next([0], [0], [new], [torch.tensor([1])], [torch.tensor([1])])
  assert rows[0].tolist() == [2]


def test_a_negative_id_is_named_by_the_hash_table_inducer():
  inducer = ops.Inducer(1, [])
  inducer.init_nodes([torch.tensor([0])])
  with pytest.raises(ValueError, match='node id -3 is out of range'):
    inducer.induce_next([0], [0], [torch.tensor([0])], [torch.tensor([1, -3])], [torch.tensor([2])])


def disjoint_hops(seed, bits=15, shuffle=False, one_big_seed=False):
  """Disjoint keys ((seed << bits) | id): 300 seeds, then three hops, each
  from the nodes the last one added; their keys come seed by seed, as a
  disjoint hop's do, or shuffled; one seed may grow far past its share."""
  g = torch.Generator().manual_seed(seed)
  n = 300
  seeds = (torch.arange(n) << bits) | torch.randint(0, 1 << bits, (n,), generator=g)
  frontier, hops, known = seeds.tolist(), [], set(seeds.tolist())
  for _ in range(3):
    srcs = torch.tensor(frontier)
    if shuffle:
      srcs = srcs[torch.randperm(srcs.numel(), generator=g)]
    nums = torch.randint(0, 8, (srcs.numel(),), generator=g)
    if one_big_seed:
      nums[(srcs >> bits) == 7] = 400
    ids = torch.randint(0, 64, (int(nums.sum()),), generator=g)  # repeats within a seed
    nbrs = ((srcs >> bits).repeat_interleave(nums) << bits) | ids
    hops.append((srcs, nbrs, nums))
    frontier = [v for v in dict.fromkeys(nbrs.tolist()) if v not in known]
    known.update(frontier)
  return seeds, hops


@pytest.mark.parametrize('shuffle', [False, True])
@pytest.mark.parametrize('one_big_seed', [False, True])
def test_disjoint_keys_relabel_as_a_sequential_one(shuffle, one_big_seed):
  # The grouped hash map (each seed's keys in a region of its own) gives the
  # first-appearance relabelling of a plain dict, whatever the key order
  # and however unevenly the seeds grow.
  seeds, hops = disjoint_hops(3, shuffle=shuffle, one_big_seed=one_big_seed)
  want = reference_hops(seeds, hops)
  inducer = ops.Inducer(1, [], 15)
  assert run(inducer, seeds, hops) == want
  assert run(inducer, seeds, hops) == want, 'a reused inducer'


def test_disjoint_bits_need_hash_maps():
  with pytest.raises(ValueError, match='disjoint keys need hash maps'):
    ops.Inducer(1, [100], 15)
  with pytest.raises(ValueError, match='disjoint_bits must be in'):
    ops.Inducer(1, [], 63)
