"""Size-bounded label propagation over a :class:`BlockedAdjacency`, block by
block: what the streaming partitioner clusters nodes with (every node
starts with a label of its own and takes its neighbors' commonest label) and
refines a k-way assignment with (every node moves to the partition most of
its edges lead to). A move is taken only while its target stays under the
size bounds; within a block, nodes decide in a few random rounds, so two
neighbors rarely swap labels at once.
"""

from dataclasses import dataclass
from typing import Iterable

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


def _rounds(block: AdjacencyBlock, num_rounds: int, generator: torch.Generator) -> Iterable:
  """The block's edges split by a random round per source node."""
  if num_rounds == 1:
    yield block
    return
  node_round = torch.randint(0, num_rounds, (block.stop - block.start,), generator=generator)
  edge_round = node_round[block.src]
  order = torch.argsort(edge_round)
  ends = torch.cumsum(torch.bincount(edge_round, minlength=num_rounds), 0).tolist()
  src, dst = block.src[order], block.dst[order]
  weight = None if block.weight is None else block.weight[order]
  for start, end in zip([0] + ends[:-1], ends):
    piece_weight = None if weight is None else weight[start:end]
    yield AdjacencyBlock(block.start, block.stop, src[start:end], dst[start:end], piece_weight)


def cluster_moves(block: AdjacencyBlock, label: torch.Tensor, generator: torch.Generator) -> Moves:
  """For each node of ``block`` whose neighbors' commonest label (by edge
  weight, ties broken at random) outweighs its own label's share: a move
  to it."""
  num_labels = label.numel()
  node_labels = label[block.dst]
  key, inverse, counts = torch.unique(
    block.src * num_labels + node_labels, return_inverse=True, return_counts=True
  )
  if block.weight is None:
    weight = counts.to(torch.float64)
  else:
    weight = torch.zeros(key.numel(), dtype=torch.float64)
    weight.index_add_(0, inverse, block.weight.to(torch.float64))
  local, target = key // num_labels, key % num_labels
  node = local + block.start
  own = target == label[node]
  noisy = weight + 0.5 * torch.rand(weight.numel(), generator=generator, dtype=torch.float64)
  num_local = block.stop - block.start
  best = torch.full((num_local,), -1.0, dtype=torch.float64)
  best.scatter_reduce_(0, local, torch.where(own, -1.0, noisy), 'amax')
  own_weight = torch.zeros(num_local, dtype=torch.float64).index_add_(0, local[own], weight[own])
  pick = ~own & (noisy == best[local]) & (weight > own_weight[local])
  return Moves(node[pick], target[pick], weight[pick] - own_weight[local[pick]])


def refine_moves(
  block: AdjacencyBlock, part: torch.Tensor, num_parts: int, generator: torch.Generator
) -> Moves:
  """For each node of ``block`` with more edge weight into another
  partition than into its own: a move to the partition with the most."""
  num_local = block.stop - block.start
  weight = torch.zeros(num_local * num_parts, dtype=torch.float64)
  weight.index_add_(0, block.src * num_parts + part[block.dst], block.weights().to(torch.float64))
  weight = weight.view(num_local, num_parts)
  node = torch.arange(block.start, block.stop)
  own = part[node]
  own_weight = weight.gather(1, own.view(-1, 1)).view(-1)
  noisy = weight + 0.5 * torch.rand(weight.shape, generator=generator, dtype=torch.float64)
  noisy.scatter_(1, own.view(-1, 1), -1.0)
  target = noisy.argmax(dim=1)
  gain = weight.gather(1, target.view(-1, 1)).view(-1) - own_weight
  pick = gain > 0
  return Moves(node[pick], target[pick], gain[pick])


def cut_change(block: AdjacencyBlock, state: 'PassState') -> float:
  """How much the undirected cut weight changed when the nodes marked in
  ``state.moved`` of ``block`` left their ``state.prior`` labels: edges with
  both ends moved count half from each side."""
  src = block.src + block.start
  mine = state.moved[src]
  src, dst, w = src[mine], block.dst[mine], block.weights()[mine].to(torch.float64)
  label, moved = state.label, state.moved
  dst_moved = moved[dst]
  dst_before = torch.where(dst_moved, state.prior[dst], label[dst])
  was = (state.prior[src] != dst_before).to(torch.float64)
  now = (label[src] != label[dst]).to(torch.float64)
  share = torch.where(dst_moved, 0.5, 1.0)
  return float(((now - was) * w * share).sum())


@dataclass
class PassState:
  """What a pass of label propagation updates, and its scratch space.

  Args:
    label: each node's label (a cluster, or a partition when refining).
    node_weight: each node's weights ``[nodes, columns]`` (int64).
    load: each label's summed node weights ``[labels, columns]``.
    cap: the most weight a label may hold, per column.
    num_parts: the partition count when refining, 0 when clustering.
    generator: the random generator for rounds and ties.
  """

  label: torch.Tensor
  node_weight: torch.Tensor
  load: torch.Tensor
  cap: torch.Tensor
  num_parts: int
  generator: torch.Generator
  moved: torch.Tensor = None
  prior: torch.Tensor = None

  def __post_init__(self):
    if self.num_parts:
      self.moved = torch.zeros(self.label.numel(), dtype=torch.bool)
      self.prior = torch.empty_like(self.label)


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


def propagate(block: AdjacencyBlock, state: PassState, num_rounds: int) -> tuple:
  """One block of a pass: clusters or refines (``state.num_parts``).
  Returns the nodes moved and the change in the undirected cut weight
  (refining only; 0 otherwise)."""
  moved_count, change = 0, 0.0
  for piece in _rounds(block, num_rounds, state.generator):
    if state.num_parts:
      moves = refine_moves(piece, state.label, state.num_parts, state.generator)
    else:
      moves = cluster_moves(piece, state.label, state.generator)
    nodes, before = take_moves(moves, state.label, state.node_weight, state.load, state.cap)
    moved_count += nodes.numel()
    if state.num_parts and nodes.numel():
      state.prior[nodes] = before
      state.moved[nodes] = True
      change += cut_change(piece, state)
      state.moved[nodes] = False
  return moved_count, change


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
