"""Dataset readers and synthetic graph generators (no downloads)."""

from .community_files import CommunityFiles, write_community_graph
from .ogb import load_ogb_node_dataset
from .planetoid import load_planetoid
from .synthetic import MAG_EDGE_TYPES, community_graph, mag_like_graph, power_law_edges

__all__ = [
  'CommunityFiles',
  'MAG_EDGE_TYPES',
  'community_graph',
  'load_ogb_node_dataset',
  'load_planetoid',
  'mag_like_graph',
  'power_law_edges',
  'write_community_graph',
]
