"""Size-bounded label propagation over a :class:`BlockedAdjacency`, block by
block: what the streaming partitioner clusters nodes with (every node
starts with a label of its own and takes its neighbors' commonest label) and
refines a k-way assignment with (every node moves to the partition most of
its edges lead to). A move is taken only while its target stays under the
size bounds. Nodes decide one by one (a C++ kernel), each seeing the moves
before it; groups of nodes (clusters) move together by :func:`take_moves`.
"""

from dataclasses import dataclass
from typing import Iterable, Optional, Tuple

import torch

from .adjacency_blocks import AdjacencyBlock

TAKE_ROUNDS = 8  # rounds of take_moves: each makes room with the weight that left


@dataclass
class Moves:
  """Candidate moves of nodes to new labels.

  Args:
    node: the nodes (global ids).
    target: the label each would take.
    gain: the edge weight each move brings inside its label.
  """

  node: torch.Tensor
  target: torch.Tensor
  gain: torch.Tensor

  def select(self, keep: torch.Tensor) -> 'Moves':
    return Moves(self.node[keep], self.target[keep], self.gain[keep])


def accept_within(moves: Moves, node_weight: torch.Tensor, load: torch.Tensor, cap: torch.Tensor):
  """The moves to take, best gain first per target, while every target's
  ``load`` (``[labels, columns]``) plus the weights moved in stays within
  ``cap`` (``[columns]``). Updates ``load`` (in and out) and returns the
  accepted moves."""
  order = torch.argsort(moves.gain, descending=True, stable=True)
  order = order[torch.argsort(moves.target[order], stable=True)]
  moves = moves.select(order)
  weight = node_weight[moves.node]
  running = torch.cumsum(weight, 0)
  _, counts = torch.unique_consecutive(moves.target, return_counts=True)
  group_end = torch.cumsum(counts, 0)
  before = torch.repeat_interleave(
    torch.cat([torch.zeros_like(running[:1]), running[group_end[:-1] - 1]]), counts, dim=0
  )
  fits = (load[moves.target] + running - before <= cap).all(dim=1)
  return moves.select(fits)


@dataclass
class PassState:
  """What a pass of label propagation updates.

  Args:
    label: each node's label (a cluster, or a partition when refining).
    node_weight: each node's weights ``[nodes, columns]`` (int64).
    load: each label's summed node weights ``[labels, columns]``.
    cap: the most weight a label may hold, per column.
    generator: the random generator of the visit orders and ties.
    tie_salt: when set, nodes also move on a tie, toward the label with the
      larger ``splitmix64(label ^ tie_salt)``, the same order in every block
      (clustering: groups of equal pull merge instead of stalling). When
      None, a node keeps its label on a tie, and ties between other labels
      are broken by a salt drawn per block.
  """

  label: torch.Tensor
  node_weight: torch.Tensor
  load: torch.Tensor
  cap: torch.Tensor
  generator: torch.Generator
  tie_salt: Optional[int] = None


def take_moves(
  moves: Moves,
  label: torch.Tensor,
  node_weight: torch.Tensor,
  load: torch.Tensor,
  cap: torch.Tensor,
  rounds: int = TAKE_ROUNDS,
) -> tuple:
  """Takes the moves that fit (:func:`accept_within`), again and again
  while the weight that left a label makes room for more (full labels then
  trade nodes). Updates ``label`` and ``load`` in place; returns the moved
  nodes and their labels before."""
  taken_nodes, taken_before = [], []
  for _ in range(rounds):
    taken = accept_within(moves, node_weight, load, cap)
    if taken.node.numel() == 0:
      break
    weight = node_weight[taken.node]
    before = label[taken.node]
    load.index_add_(0, before, -weight)
    load.index_add_(0, taken.target, weight)
    label[taken.node] = taken.target
    taken_nodes.append(taken.node)
    taken_before.append(before)
    moves = moves.select(~torch.isin(moves.node, taken.node))
  if not taken_nodes:
    empty = torch.empty(0, dtype=torch.int64)
    return empty, empty
  return torch.cat(taken_nodes), torch.cat(taken_before)


def propagate(block: AdjacencyBlock, state: PassState) -> Tuple[int, int]:
  """One block of a pass, node by node in a random order
  (``glt::propagate_labels_``): each node takes the label its edges weigh
  most into, among those with room for it, when that weighs more than its
  own (or as much, with ``state.tie_salt``). Returns the nodes moved and
  the drop of the undirected cut weight between labels."""
  order = torch.randperm(block.stop - block.start, generator=state.generator)
  move_on_tie = state.tie_salt is not None
  salt = state.tie_salt if move_on_tie else draw_salt(state.generator)
  return torch.ops.glt.propagate_labels_(
    block.src, block.dst, block.weight, block.start, order, state.label, state.node_weight,
    state.load, state.cap, salt, move_on_tie,
  )  # fmt: skip


def draw_salt(generator: torch.Generator) -> int:
  """A random 62-bit salt for the kernel's tie keys."""
  return int(torch.randint(0, 2**62, (1,), generator=generator))


def weight_to_parts(
  adjacency: Iterable[AdjacencyBlock], label: torch.Tensor, part: torch.Tensor, shape: tuple
) -> torch.Tensor:
  """``[labels, parts]``: the edge weight from each label's nodes into each
  partition (``part`` by node), summed over one pass of ``adjacency``."""
  num_labels, num_parts = shape
  total = torch.zeros(num_labels * num_parts, dtype=torch.float64)
  for block in adjacency:
    key = label[block.src + block.start] * num_parts + part[block.dst]
    total.index_add_(0, key, block.weights().to(torch.float64))
  return total.view(num_labels, num_parts)


def group_moves(
  weight: torch.Tensor, part: torch.Tensor, share: float, generator: torch.Generator
) -> Moves:
  """For a random ``share`` of the groups (``weight``: their edge weight
  into each partition, ``part``: their partitions) with more weight into
  another partition than into their own: a move to the one with the most."""
  own_weight = weight.gather(1, part.view(-1, 1)).view(-1)
  noisy = weight + 0.5 * torch.rand(weight.shape, generator=generator, dtype=torch.float64)
  noisy.scatter_(1, part.view(-1, 1), -1.0)
  target = noisy.argmax(dim=1)
  gain = weight.gather(1, target.view(-1, 1)).view(-1) - own_weight
  eligible = torch.rand(part.numel(), generator=generator) < share
  pick = torch.nonzero((gain > 0) & eligible).view(-1)
  return Moves(pick, target[pick], gain[pick])
