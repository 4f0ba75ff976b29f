"""glt::propagate_labels_, one block of size-bounded label propagation node
by node, against a brute-force walk of the same visit order; its gains
against the cut measured before and after; bad input raising ValueError."""

from collections import Counter

import pytest
import torch

import graphlearn_torch  # noqa: F401  (registers torch.ops.glt)

MASK = (1 << 64) - 1


def splitmix64(x: int) -> int:
  x = (x + 0x9E3779B97F4A7C15) & MASK
  x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
  x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
  return x ^ (x >> 31)


def brute_force(src, dst, weight, start, order, label, node_weight, load, cap, salt, move_on_tie):
  """Each node in ``order``: the label its edges weigh most into among
  those with room, when that beats its own (ties: the larger
  splitmix64(label ^ salt), the own label among them with
  ``move_on_tie``)."""
  label, load = label.tolist(), load.tolist()
  weight = [1] * len(src) if weight is None else weight.tolist()
  out = {}
  for s, d, w in zip(src.tolist(), dst.tolist(), weight):
    out.setdefault(s, []).append((d, w))
  moved = gain = 0
  for v in order.tolist():
    node = start + v
    own, mine = label[node], node_weight[node].tolist()
    into = Counter()
    for d, w in out.get(v, []):
      into[label[d]] += w

    rank = {lab: (into[lab], splitmix64(lab ^ salt)) for lab in into}
    rank[own] = (into[own], splitmix64(own ^ salt) if move_on_tie else MASK + 1)
    fitting = [
      lab for lab in into
      if lab != own and rank[lab] > rank[own]
      and all(load[lab][c] + mine[c] <= cap[c] for c in range(len(mine)))
    ]  # fmt: skip
    if not fitting:
      continue
    best = max(fitting, key=rank.get)
    for c in range(len(mine)):
      load[own][c] -= mine[c]
      load[best][c] += mine[c]
    gain += into[best] - into[own]
    label[node] = best
    moved += 1
  return label, load, moved, gain


def block_of(num_nodes, num_edges, start, stop, seed, weighted):
  g = torch.Generator().manual_seed(seed)
  src = torch.randint(0, stop - start, (num_edges,), generator=g)
  dst = torch.randint(0, num_nodes, (num_edges,), generator=g)
  weight = torch.randint(1, 4, (num_edges,), generator=g) if weighted else None
  return src, dst, weight, g


@pytest.mark.parametrize(
  'num_labels,weighted,move_on_tie,seed',
  [(200, False, False, 0), (4, True, False, 1), (7, True, False, 2), (200, False, True, 3),
   (7, True, True, 4)],
)  # fmt: skip
def test_each_node_takes_the_heaviest_label_with_room(num_labels, weighted, move_on_tie, seed):
  num_nodes, start, stop = 200, 40, 160
  src, dst, weight, g = block_of(num_nodes, 1500, start, stop, seed, weighted)
  label = torch.randint(0, num_labels, (num_nodes,), generator=g)
  node_weight = torch.randint(0, 3, (num_nodes, 2), generator=g)
  load = torch.zeros(num_labels, 2, dtype=torch.int64).index_add_(0, label, node_weight)
  cap = (load.sum(0) * 1.05 / min(num_labels, 4)).long() + 3
  order = torch.randperm(stop - start, generator=g)
  salt = 12345
  expected = brute_force(
    src, dst, weight, start, order, label, node_weight, load, cap.tolist(), salt, move_on_tie
  )
  moved, gain = torch.ops.glt.propagate_labels_(
    src, dst, weight, start, order, label, node_weight, load, cap, salt, move_on_tie
  )
  assert label.tolist() == expected[0] and load.tolist() == expected[1]
  assert (moved, gain) == expected[2:] and moved > 0
  assert (load <= cap).all() or num_labels == 200  # singletons may start over the cap


def undirected_cut(src, dst, label):
  return int((label[src] != label[dst]).sum()) // 2


def test_gain_is_the_drop_of_the_cut_and_clusters_form():
  # Two cliques of 30 joined by one edge; every node starts alone.
  g = torch.Generator().manual_seed(4)
  pairs = [(a, b) for c in (0, 30) for a in range(c, c + 30) for b in range(c, c + 30) if a != b]
  pairs += [(0, 30), (30, 0)]
  src, dst = torch.tensor(pairs).t()
  label = torch.arange(60)
  node_weight = torch.ones(60, 1, dtype=torch.int64)
  load = node_weight.clone()
  before = undirected_cut(src, dst, label)
  moved, gain = torch.ops.glt.propagate_labels_(
    src, dst, None, 0, torch.randperm(60, generator=g), label, node_weight, load,
    torch.tensor([30]), 7, False,
  )  # fmt: skip
  assert gain == before - undirected_cut(src, dst, label) and moved > 0
  for _ in range(3):
    torch.ops.glt.propagate_labels_(
      src, dst, None, 0, torch.randperm(60, generator=g), label, node_weight, load,
      torch.tensor([30]), 7, False,
    )  # fmt: skip
  assert len(set(label[:30].tolist())) == 1 and len(set(label[30:].tolist())) == 1
  assert label[0] != label[30] and undirected_cut(src, dst, label) == 1


def test_moving_on_ties_merges_a_ring_that_stalls_without():
  # A ring of singletons: the first moves make runs of two or three, and
  # then a node at a run's end weighs its own run and the next one alike;
  # without ties it stays (19 runs here), with them runs merge (6).
  n = 64
  ring = torch.arange(n)
  src = torch.cat([ring, ring])
  dst = torch.cat([(ring + 1) % n, (ring - 1) % n])
  counts = []
  for move_on_tie in (False, True):
    g = torch.Generator().manual_seed(6)
    label, node_weight = torch.arange(n), torch.ones(n, 1, dtype=torch.int64)
    load = node_weight.clone()
    for _ in range(4):
      torch.ops.glt.propagate_labels_(
        src, dst, None, 0, torch.randperm(n, generator=g), label, node_weight, load,
        torch.tensor([n]), 11, move_on_tie,
      )  # fmt: skip
    counts.append(torch.unique(label).numel())
  assert counts[1] <= counts[0] // 2


def test_bad_input_is_a_value_error():
  src, dst, weight, _ = block_of(50, 200, 0, 50, 5, True)
  label = torch.zeros(50, dtype=torch.int64)
  node_weight = torch.ones(50, 1, dtype=torch.int64)
  load, cap, order = torch.tensor([[50], [0]]), torch.tensor([40]), torch.arange(50)

  def call(**change):
    args = dict(src=src, dst=dst, weight=weight, start=0, order=order, label=label,
                node_weight=node_weight, load=load, cap=cap, salt=0, move_on_tie=False)  # fmt: skip
    args.update(change)
    torch.ops.glt.propagate_labels_(*args.values())

  for change, message in (
    (dict(order=torch.zeros(50, dtype=torch.int64)), 'permutation'),
    (dict(dst=dst + 50), 'dst holds ids outside'),
    (dict(src=src + 1), 'src holds ids outside'),
    (dict(label=label + 2), 'label holds ids outside'),
    (dict(weight=weight * 0), 'weight'),
    (dict(weight=weight[:-1]), 'weight must hold one entry per edge'),
    (dict(load=torch.zeros(2, 2, dtype=torch.int64)), 'load must be'),
    (dict(node_weight=torch.ones(49, 1, dtype=torch.int64)), 'node_weight must be'),
    (dict(start=10), 'must lie within'),
    (dict(start=2**63 - 1), 'must lie within'),  # start + the block's size overflows
    (dict(dst=dst.int()), 'dst must be int64'),
  ):
    with pytest.raises(ValueError, match=message):
      call(**change)
  assert torch.equal(label, torch.zeros(50, dtype=torch.int64))  # nothing touched
