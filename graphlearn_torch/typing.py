"""Type aliases shared across graphlearn_torch (GLT 0.2.x compatible)."""

from enum import Enum
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

NodeType = str
EdgeType = Tuple[str, str, str]

# A tensor-like input: a torch tensor, a NumPy array or a nested sequence.
TensorDataType = Union[torch.Tensor, np.ndarray, Sequence]

NumNeighbors = Union[List[int], Dict[EdgeType, List[int]]]
InputNodes = Union[
  torch.Tensor, NodeType, Tuple[NodeType, torch.Tensor], Tuple[NodeType, None], None
]
EdgeIndexTensor = Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]
InputEdges = Union[EdgeIndexTensor, EdgeType, Tuple[EdgeType, Optional[EdgeIndexTensor]], None]

NodeLabel = Union[TensorDataType, Dict[NodeType, TensorDataType]]
NodeIndex = Union[TensorDataType, Dict[NodeType, TensorDataType]]


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
    if rel.split('_', 1)[0] == 'rev':
      rel = rel.split('_', 1)[1]
    else:
      rel = 'rev_' + rel
  return dst, rel, src


def as_str(type_: Union[NodeType, EdgeType]) -> str:
  """Names a node type or edge type as a string (edge types joined by ``__``)."""
  if isinstance(type_, str):
    return type_
  if isinstance(type_, (tuple, list)) and len(type_) == 3:
    return '__'.join(type_)
  raise ValueError(f'not a node type or edge type: {type_!r}')
