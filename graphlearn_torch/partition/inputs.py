"""A partitioner's input graph, by type and checked: what ``PartitionerBase``
takes as tensors, NumPy memory maps or dicts of them by type, held as dicts
by type (the homogeneous graph under ``HOMO_NODE_TYPE`` / ``HOMO_EDGE_TYPE``)
once its shapes and ids are known to agree."""

from dataclasses import dataclass
from typing import Dict, Tuple

import torch

from ..typing import HOMO_EDGE_TYPE, HOMO_NODE_TYPE, EdgeType, NodeType
from ..utils.times import checked_time
from .npy import as_tensor
from .summary import split_edge_index

SPLITS = ('train_idx', 'val_idx', 'test_idx')


@dataclass
class PartitionInputs:
  r"""A graph to partition, every field a dict by type.

  Args:
    hetero: whether the graph was given by type.
    num_nodes: the node counts.
    edge_index: each edge type's ``(rows, cols)``.
    node_feat: node feature tables.
    edge_feat: edge feature tables, by edge position.
    edge_weights: edge weights, by edge position.
    node_labels: node labels.
    node_time: node times.
    edge_time: edge times, by edge position.
    node_split: the seed splits (``SPLITS``), each by node type.
  """

  hetero: bool
  num_nodes: Dict[NodeType, int]
  edge_index: Dict[EdgeType, Tuple[torch.Tensor, torch.Tensor]]
  node_feat: Dict[NodeType, torch.Tensor]
  edge_feat: Dict[EdgeType, torch.Tensor]
  edge_weights: Dict[EdgeType, torch.Tensor]
  node_labels: Dict[NodeType, torch.Tensor]
  node_time: Dict[NodeType, torch.Tensor]
  edge_time: Dict[EdgeType, torch.Tensor]
  node_split: Dict[str, Dict[NodeType, torch.Tensor]]

  @classmethod
  def of(
    cls,
    num_nodes,
    edge_index,
    node_feat=None,
    edge_feat=None,
    edge_weights=None,
    node_labels=None,
    node_split=None,
    node_time=None,
    edge_time=None,
  ) -> 'PartitionInputs':
    r"""The inputs as a partitioner takes them (see ``PartitionerBase``),
    held by type and checked.

    Raises:
      TypeError: a mix of values by type and not by type.
      ValueError: shapes, counts or ids that do not agree.
    """
    hetero = isinstance(num_nodes, dict) or isinstance(edge_index, dict)
    if hetero and not (isinstance(num_nodes, dict) and isinstance(edge_index, dict)):
      raise TypeError('a heterogeneous graph needs num_nodes and edge_index as dicts by type')

    def nodes(value, what):
      return _by_type(value, what, hetero, HOMO_NODE_TYPE)

    def edges(value, what):
      return _by_type(value, what, hetero, HOMO_EDGE_TYPE)

    def times(value, what, by):
      return {t: checked_time(as_tensor(v), f'{what} of {t!r}' if hetero else what)
              for t, v in by(value, what).items()}  # fmt: skip

    inputs = cls(
      hetero=hetero,
      num_nodes={t: int(n) for t, n in nodes(num_nodes, 'num_nodes').items()},
      edge_index={t: split_edge_index(e) for t, e in edges(edge_index, 'edge_index').items()},
      node_feat={t: as_tensor(f) for t, f in nodes(node_feat, 'node_feat').items()},
      edge_feat={t: as_tensor(f) for t, f in edges(edge_feat, 'edge_feat').items()},
      edge_weights={
        t: as_tensor(w).reshape(-1) for t, w in edges(edge_weights, 'edge_weights').items()
      },
      node_labels={t: as_tensor(y) for t, y in nodes(node_labels, 'node_labels').items()},
      node_time=times(node_time, 'node_time', nodes),
      edge_time=times(edge_time, 'edge_time', edges),
      node_split={
        name: {t: as_tensor(x).to(torch.int64).reshape(-1) for t, x in nodes(ids, name).items()}
        for name, ids in zip(SPLITS, node_split or (None, None, None))
      },
    )
    inputs.check()
    return inputs

  def check(self) -> None:
    r"""Refuses counts, shapes and ids that do not agree, naming them."""
    for ntype, n in self.num_nodes.items():
      if n < 0:
        raise ValueError(f'num_nodes of {ntype!r} is negative: {n}')
    for etype in self.edge_time:
      if etype not in self.edge_index:
        raise ValueError(f'edge_time names edge type {etype} missing from edge_index')
    for etype in self.edge_index:
      self._check_edges(etype)
    for what, table in (
      ('node_feat', self.node_feat),
      ('node_labels', self.node_labels),
      ('node_time', self.node_time),
    ):
      for ntype, t in table.items():
        if ntype not in self.num_nodes:
          raise ValueError(f'{what} names node type {ntype!r} missing from num_nodes')
        if t.size(0) != self.num_nodes[ntype]:
          raise ValueError(
            f'{what} of {ntype!r} has {t.size(0)} rows for {self.num_nodes[ntype]} nodes'
          )
    for name, split in self.node_split.items():
      for ntype, ids in split.items():
        n = self.num_nodes.get(ntype, 0)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= n):
          raise ValueError(f'{name} of {ntype!r} holds ids outside [0, {n})')

  def _check_edges(self, etype: EdgeType) -> None:
    rows, cols = self.edge_index[etype]
    for side, ids, ntype in (('source', rows, etype[0]), ('destination', cols, etype[-1])):
      if ntype not in self.num_nodes:
        raise ValueError(f'edge type {etype} names node type {ntype!r} missing from num_nodes')
      if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.num_nodes[ntype]):
        raise ValueError(
          f'edge type {etype}: {side} ids must be in [0, {self.num_nodes[ntype]}), got '
          f'[{int(ids.min())}, {int(ids.max())}]'
        )
    num_edges = rows.numel()
    for what, table in (
      ('edge_feat', self.edge_feat),
      ('edge_weights', self.edge_weights),
      ('edge_time', self.edge_time),
    ):
      if etype in table and table[etype].size(0) != num_edges:
        raise ValueError(f'{what} of {etype} has {table[etype].size(0)} rows for {num_edges} edges')


def _by_type(value, what: str, hetero: bool, default_key) -> dict:
  r"""``value`` as a dict by type ({} for None); refuses a dict for a
  homogeneous graph and anything else for a heterogeneous one."""
  if value is None:
    return {}
  if hetero != isinstance(value, dict):
    raise TypeError(f'{what} must {"" if hetero else "not "}be a dict by type')
  return dict(value) if hetero else {default_key: value}
