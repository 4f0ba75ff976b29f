"""Dataset readers and synthetic graph generators (no downloads)."""

from .ogb import load_ogb_node_dataset
from .planetoid import load_planetoid
from .synthetic import MAG_EDGE_TYPES, community_graph, mag_like_graph, power_law_edges

__all__ = [
  'MAG_EDGE_TYPES',
  'community_graph',
  'load_ogb_node_dataset',
  'load_planetoid',
  'mag_like_graph',
  'power_law_edges',
]
