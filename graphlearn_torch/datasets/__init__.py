"""Dataset readers and synthetic graph generators (no downloads)."""

from .ogb import load_ogb_node_dataset
from .planetoid import load_planetoid
from .synthetic import community_graph, power_law_edges

__all__ = ['community_graph', 'load_ogb_node_dataset', 'load_planetoid', 'power_law_edges']
