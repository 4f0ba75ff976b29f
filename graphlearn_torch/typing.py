"""Type aliases shared across graphlearn_torch (GLT 0.2.x compatible)."""

from enum import Enum
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import torch

NodeType = str
EdgeType = Tuple[str, str, str]

# A tensor-like input: a torch tensor, a NumPy array or a nested sequence.
TensorDataType = Union[torch.Tensor, np.ndarray, Sequence]

NumNeighbors = Union[List[int], Dict[EdgeType, List[int]]]
# Seed nodes: a tensor of ids, or (server-client mode) the path of a seed file
# on the server.
Seeds = Union[torch.Tensor, str]
InputNodes = Union[
  Seeds, NodeType, Tuple[NodeType, Seeds], Tuple[NodeType, List[Seeds]], Tuple[NodeType, None], None
]
EdgeIndexTensor = Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]
InputEdges = Union[EdgeIndexTensor, EdgeType, Tuple[EdgeType, Optional[EdgeIndexTensor]], None]

NodeLabel = Union[TensorDataType, Dict[NodeType, TensorDataType]]
NodeIndex = Union[TensorDataType, Dict[NodeType, TensorDataType]]


class GraphPartitionData(NamedTuple):
  """The edges of one partition (global node ids, global edge ids)."""

  edge_index: torch.Tensor  # [2, num_edges]: rows, cols
  eids: torch.Tensor
  weights: Optional[torch.Tensor] = None


class FeaturePartitionData(NamedTuple):
  """The feature rows held by one partition, their ids, and its cache."""

  feats: Optional[torch.Tensor]
  ids: Optional[torch.Tensor]
  cache_feats: Optional[torch.Tensor] = None
  cache_ids: Optional[torch.Tensor] = None


HeteroGraphPartitionData = Dict[EdgeType, GraphPartitionData]
HeteroFeaturePartitionData = Dict[Union[NodeType, EdgeType], FeaturePartitionData]


class Split(Enum):
  """A node split of a dataset."""

  train = 'train'
  valid = 'valid'
  test = 'test'


# Internal stand-ins that make a homogeneous graph the one-type case of a
# heterogeneous one.
HOMO_NODE_TYPE: NodeType = '_N'
HOMO_EDGE_TYPE: EdgeType = ('_N', '_E', '_N')


def reverse_edge_type(etype: EdgeType) -> EdgeType:
  """Returns the type of the reversed edges: (dst, 'rev_' + rel, src).

  A relation that already starts with ``rev_`` loses the prefix, and an edge
  type whose source and destination types are equal keeps its relation.
  """
  src, rel, dst = etype
  if src != dst:
    rel = rel[len('rev_') :] if rel.startswith('rev_') and len(rel) > 4 else 'rev_' + rel
  return dst, rel, src


# What joins an edge type's three names in file and directory names.
EDGE_TYPE_STR_SPLIT = '__'


def as_str(type: Union[NodeType, EdgeType]) -> str:  # noqa: A002 (GLT's parameter name)
  """Names a node type or edge type as a string (edge types joined by
  ``EDGE_TYPE_STR_SPLIT``)."""
  if isinstance(type, str):
    return type
  if isinstance(type, (tuple, list)) and len(type) == 3:
    return EDGE_TYPE_STR_SPLIT.join(type)
  raise ValueError(f'not a node type or edge type: {type!r}')


# What ``from graphlearn_torch.typing import *`` (and so ``graphlearn_torch``
# itself, as in GLT) exports.
__all__ = [
  'EDGE_TYPE_STR_SPLIT',
  'EdgeIndexTensor',
  'EdgeType',
  'FeaturePartitionData',
  'GraphPartitionData',
  'HeteroFeaturePartitionData',
  'HeteroGraphPartitionData',
  'InputEdges',
  'InputNodes',
  'NodeIndex',
  'NodeLabel',
  'NodeType',
  'NumNeighbors',
  'Seeds',
  'Split',
  'TensorDataType',
  'as_str',
  'reverse_edge_type',
]
