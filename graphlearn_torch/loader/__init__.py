"""Loaders yielding PyG Data / HeteroData mini-batches."""

from .neighbor_loader import NeighborLoader
from .node_loader import NodeLoader, SeedBatcher
from .transform import to_data, to_hetero_data

__all__ = ['NeighborLoader', 'NodeLoader', 'SeedBatcher', 'to_data', 'to_hetero_data']
