"""Data layer: topology, graph, features and datasets."""

from .dataset import Dataset, random_split, rebuild_dataset, reduce_dataset
from .feature import DeviceGroup, Feature, rebuild_feature, reduce_feature
from .graph import Graph, Topology, rebuild_graph, reduce_graph

__all__ = [
  'Dataset',
  'DeviceGroup',
  'Feature',
  'Graph',
  'Topology',
  'random_split',
  'rebuild_dataset',
  'rebuild_feature',
  'rebuild_graph',
  'reduce_dataset',
  'reduce_feature',
  'reduce_graph',
]
