"""How often sampling from each partition reads each node's feature row:
what a partitioner's feature caches are chosen by."""

from typing import Dict, List

import torch

from ..typing import EdgeType, NodeType

EDGE_CHUNK = 1 << 22  # edges handled at a time when assigning and counting cuts


def expected_reads(
  num_parts: int,
  num_nodes: Dict[NodeType, int],
  edge_index: Dict[EdgeType, tuple],
  node_pb: Dict[NodeType, torch.Tensor],
  train: Dict[NodeType, torch.Tensor],
  fanouts: List[int],
  by_src: bool,
) -> Dict[NodeType, torch.Tensor]:
  """Per node type, a ``[num_parts, num_nodes]`` expected number of reads of
  each node's row when sampling from each partition.

  Each partition's seeds (its training nodes when ``train`` is given, else
  all its nodes) start with one visit; a hop passes a node's visits to each
  of its sampled-side neighbors, times the chance ``min(1, fanout /
  degree)`` that the neighbor is drawn. Reads of all hops add up.

  Args:
    num_parts: the number of partitions.
    num_nodes: the node count by node type.
    edge_index: ``(rows, cols)`` by edge type.
    node_pb: the partition of every node, by node type.
    train: the training seeds by node type (may be empty).
    fanouts: the fanout of each hop (-1 takes every neighbor).
    by_src: whether sampling walks from an edge's source to its destination
      (the direction ``edge_assign_strategy='by_src'`` serves).
  """
  visits = {}
  for ntype, n in num_nodes.items():
    seeds = torch.zeros(num_parts, n)
    pb = node_pb[ntype]
    ids = train.get(ntype) if train else None
    for p in range(num_parts):
      start = ids[pb[ids] == p] if ids is not None else torch.nonzero(pb == p).view(-1)
      seeds[p, start] = 1.0
    visits[ntype] = seeds
  hot = {t: torch.zeros(num_parts, n) for t, n in num_nodes.items()}
  degrees = {}  # per edge type, the seed side's degree (the same every hop)
  for etype, (rows, cols) in edge_index.items():
    seed_t, seed_side = (etype[0], rows) if by_src else (etype[-1], cols)
    degree = torch.zeros(num_nodes[seed_t])
    for start in range(0, seed_side.numel(), EDGE_CHUNK):
      chunk = seed_side[start : start + EDGE_CHUNK].to(torch.int64)
      degree += torch.bincount(chunk, minlength=degree.numel())
    degrees[etype] = degree
  for fanout in fanouts:
    reached = {t: torch.zeros(num_parts, n) for t, n in num_nodes.items()}
    for etype, (rows, cols) in edge_index.items():
      seed_t, nbr_t = (etype[0], etype[-1]) if by_src else (etype[-1], etype[0])
      degree = degrees[etype]
      chance = torch.ones_like(degree)
      if fanout >= 0:
        chance = (fanout / degree.clamp(min=1)).clamp(max=1.0)
      passed = visits[seed_t] * chance  # what each seed hands each neighbor
      for start in range(0, rows.numel(), EDGE_CHUNK):
        r = rows[start : start + EDGE_CHUNK].to(torch.int64)
        c = cols[start : start + EDGE_CHUNK].to(torch.int64)
        seed, nbr = (r, c) if by_src else (c, r)
        reached[nbr_t].index_add_(1, nbr, passed[:, seed])
    visits = reached
    for t in hot:
      hot[t] += visits[t]
  return hot
