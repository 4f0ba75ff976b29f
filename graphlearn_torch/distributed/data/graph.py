"""DistGraph: the local partition of a graph and the books that place the rest."""

from typing import Dict, Optional, Union

import torch

from ...data import Graph
from ...partition.partition_book import PartitionBook
from ...typing import HOMO_EDGE_TYPE, EdgeType, NodeType


class DistGraph:
  r"""One partition's graph, plus where every node and edge lives.

  Args:
    num_partitions: how many partitions there are.
    partition_idx: this partition.
    local_graph: its Graph (a dict by edge type when heterogeneous).
    node_pb: the node partition book (a dict by node type when heterogeneous).
    edge_pb: the edge partition book (likewise by edge type).
  """

  def __init__(
    self,
    num_partitions: int,
    partition_idx: int,
    local_graph: Union[Graph, Dict[EdgeType, Graph]],
    node_pb: Union[PartitionBook, Dict[NodeType, PartitionBook]],
    edge_pb: Union[PartitionBook, Dict[EdgeType, PartitionBook]] = None,
  ):
    self.num_partitions = num_partitions
    self.partition_idx = partition_idx
    self.local_graph = local_graph
    self.is_hetero = isinstance(local_graph, dict)
    self.node_pb = node_pb
    self.edge_pb = edge_pb

  def get_local_graph(self, etype: Optional[EdgeType] = None) -> Graph:
    r"""This partition's Graph of ``etype`` (ignored when homogeneous)."""
    if self.is_hetero:
      return self.local_graph[etype]
    return self.local_graph

  def local_graphs(self) -> Dict[EdgeType, Graph]:
    r"""This partition's Graphs by edge type (``HOMO_EDGE_TYPE`` when
    homogeneous)."""
    return self.local_graph if self.is_hetero else {HOMO_EDGE_TYPE: self.local_graph}

  def node_book(self, ntype: Optional[NodeType] = None) -> PartitionBook:
    r"""The node partition book of ``ntype`` (ignored when homogeneous)."""
    return self.node_pb[ntype] if self.is_hetero else self.node_pb

  def get_node_partitions(self, ids: torch.Tensor, ntype: Optional[NodeType] = None):
    r"""The partition of every node in ``ids``."""
    return self.node_book(ntype)[ids]

  def get_edge_partitions(self, eids: torch.Tensor, etype: Optional[EdgeType] = None):
    r"""The partition of every edge in ``eids``."""
    if self.edge_pb is None:
      raise ValueError('this DistGraph has no edge partition book')
    book = self.edge_pb[etype] if self.is_hetero else self.edge_pb
    return book[eids]
