"""Distributed graph learning: partitions, RPC, distributed sampling and loaders."""

from .dist_context import DistContext, DistRole, get_context, init_worker_group
from .dist_dataset import DistDataset, default_id_filter, default_id_select
from .dist_feature import DistFeature, RpcFeatureLookupCallee
from .dist_graph import DistGraph
from .dist_link_neighbor_loader import DistLinkNeighborLoader
from .dist_loader import DistLoader
from .dist_neighbor_loader import DistNeighborLoader
from .dist_neighbor_sampler import DistNeighborSampler, RpcSamplingCallee
from .dist_options import CollocatedDistSamplingWorkerOptions, MpDistSamplingWorkerOptions
from .dist_sampling_producer import DistMpSamplingProducer, MpCommand
from .dist_subgraph_loader import DistSubGraphLoader
from .event_loop import ConcurrentEventLoop, wrap_torch_future
from .rpc import (
  RpcCalleeBase,
  RpcDataPartitionRouter,
  all_gather,
  barrier,
  get_rpc_master_addr,
  get_rpc_master_port,
  global_all_gather,
  global_barrier,
  init_rpc,
  rpc_is_initialized,
  rpc_register,
  rpc_request,
  rpc_request_async,
  rpc_sync_data_partitions,
  shutdown_rpc,
)

__all__ = [
  'CollocatedDistSamplingWorkerOptions',
  'ConcurrentEventLoop',
  'DistContext',
  'DistDataset',
  'DistFeature',
  'DistGraph',
  'DistLinkNeighborLoader',
  'DistLoader',
  'DistMpSamplingProducer',
  'DistNeighborLoader',
  'DistNeighborSampler',
  'DistRole',
  'DistSubGraphLoader',
  'MpCommand',
  'MpDistSamplingWorkerOptions',
  'RpcCalleeBase',
  'RpcDataPartitionRouter',
  'RpcFeatureLookupCallee',
  'RpcSamplingCallee',
  'all_gather',
  'barrier',
  'default_id_filter',
  'default_id_select',
  'get_context',
  'get_rpc_master_addr',
  'get_rpc_master_port',
  'global_all_gather',
  'global_barrier',
  'init_rpc',
  'init_worker_group',
  'rpc_is_initialized',
  'rpc_register',
  'rpc_request',
  'rpc_request_async',
  'rpc_sync_data_partitions',
  'shutdown_rpc',
  'wrap_torch_future',
]
