"""Data layer: topology, graph, features and datasets."""

from .dataset import Dataset, random_split
from .feature import DeviceGroup, Feature
from .graph import Graph, Topology

__all__ = ['Dataset', 'DeviceGroup', 'Feature', 'Graph', 'Topology', 'random_split']
