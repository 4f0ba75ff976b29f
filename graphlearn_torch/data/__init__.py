"""Data layer: topology, graph, features and datasets."""

from ..partition.partition_book import PartitionBook
from .dataset import Dataset, rebuild_dataset, reduce_dataset
from .feature import DeviceGroup, Feature, rebuild_feature, reduce_feature
from .graph import Graph, Topology, rebuild_graph, reduce_graph
from .reorder import sort_by_in_degree
from .split import random_split
from .unified_tensor import UnifiedTensor

__all__ = [
  'Dataset',
  'DeviceGroup',
  'Feature',
  'Graph',
  'PartitionBook',
  'Topology',
  'UnifiedTensor',
  'random_split',
  'rebuild_dataset',
  'rebuild_feature',
  'rebuild_graph',
  'reduce_dataset',
  'reduce_feature',
  'reduce_graph',
  'sort_by_in_degree',
]
