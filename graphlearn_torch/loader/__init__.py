"""Loaders yielding PyG Data / HeteroData mini-batches."""

from ..batch import (
  EdgeBatch,
  NodeBatch,
  SampledBatch,
  SeedBatcher,
  attach_link_metadata,
  collate,
  collect_features,
  label_batch,
  to_data,
  to_hetero_data,
  to_pyg,
)
from .base import BaseLoader, SamplerLoader
from .link_loader import LinkLoader, get_edge_label_index
from .link_neighbor_loader import LinkNeighborLoader
from .neighbor_loader import NeighborLoader
from .node_loader import NodeLoader
from .options import LoaderOptions, loader_options
from .subgraph_loader import SubGraphLoader

__all__ = [
  'BaseLoader',
  'EdgeBatch',
  'NodeBatch',
  'SampledBatch',
  'attach_link_metadata',
  'collect_features',
  'label_batch',
  'to_pyg',
  'LinkLoader',
  'LinkNeighborLoader',
  'LoaderOptions',
  'NeighborLoader',
  'NodeLoader',
  'SamplerLoader',
  'SeedBatcher',
  'SubGraphLoader',
  'collate',
  'get_edge_label_index',
  'loader_options',
  'to_data',
  'to_hetero_data',
]
