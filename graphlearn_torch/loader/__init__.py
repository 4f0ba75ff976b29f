"""Loaders yielding PyG Data / HeteroData mini-batches."""

from .base import BaseLoader, SeedBatcher
from .link_loader import LinkLoader, get_edge_label_index
from .link_neighbor_loader import LinkNeighborLoader
from .neighbor_loader import NeighborLoader
from .node_loader import NodeLoader
from .subgraph_loader import SubGraphLoader
from .transform import collate, to_data, to_hetero_data

__all__ = [
  'BaseLoader',
  'LinkLoader',
  'LinkNeighborLoader',
  'NeighborLoader',
  'NodeLoader',
  'SeedBatcher',
  'SubGraphLoader',
  'collate',
  'get_edge_label_index',
  'to_data',
  'to_hetero_data',
]
