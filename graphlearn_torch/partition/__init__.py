"""Partitioning a graph across machines, and reading partitions back.

Partitioners: RandomPartitioner, FrequencyPartitioner (hotness-aware, with
feature caches), MetisPartitioner (min edge cut) and StreamingPartitioner
(a low edge cut in memory of the order of the node count). The on-disk format is
described in docs/partition_format.md.
"""

from .format import (
  FeaturePartitionData,
  GraphPartitionData,
  save_edge_pb,
  save_feature_partition,
  save_feature_partition_cache,
  save_feature_partition_chunk,
  save_graph_cache,
  save_graph_partition,
  save_meta,
  save_node_pb,
)
from .frequency_partitioner import FrequencyPartitioner
from .load import (
  add_partition_times,
  build_partition_feature,
  cat_feature_cache,
  load_feature_partition_data,
  load_graph_partition_data,
  load_partition,
)
from .metis_partitioner import MetisPartitioner
from .npy import PartitionFileError
from .partition_book import (
  GLTPartitionBook,
  HeteroEdgePartitionDict,
  HeteroNodePartitionDict,
  OffsetId2Index,
  PartitionBook,
  RangePartitionBook,
  TensorPartitionBook,
)
from .partitioner import PartitionerBase
from .random_partitioner import RandomPartitioner
from .reader import PartitionReader, read_meta
from .streaming_partitioner import StreamingPartitioner
from .summary import PartitionSummary

__all__ = [
  'FeaturePartitionData',
  'FrequencyPartitioner',
  'GLTPartitionBook',
  'GraphPartitionData',
  'HeteroEdgePartitionDict',
  'HeteroNodePartitionDict',
  'MetisPartitioner',
  'OffsetId2Index',
  'PartitionBook',
  'PartitionFileError',
  'PartitionReader',
  'PartitionSummary',
  'PartitionerBase',
  'RandomPartitioner',
  'RangePartitionBook',
  'StreamingPartitioner',
  'TensorPartitionBook',
  'add_partition_times',
  'build_partition_feature',
  'cat_feature_cache',
  'load_feature_partition_data',
  'load_graph_partition_data',
  'load_partition',
  'read_meta',
  'save_edge_pb',
  'save_feature_partition',
  'save_feature_partition_cache',
  'save_feature_partition_chunk',
  'save_graph_cache',
  'save_graph_partition',
  'save_meta',
  'save_node_pb',
]
