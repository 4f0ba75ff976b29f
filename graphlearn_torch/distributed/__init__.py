"""Distributed graph learning: partitions, RPC, distributed sampling and loaders."""

from .dist_dataset import DistDataset, default_id_filter, default_id_select
from .dist_feature import DistFeature, RpcFeatureLookupCallee
from .dist_graph import DistGraph
from .dist_link_neighbor_loader import DistLinkNeighborLoader
from .dist_loader import DistLoader
from .dist_neighbor_loader import DistNeighborLoader
from .dist_random_partitioner import (
  DistPartitionManager,
  DistRandomPartitioner,
  RpcUpdatePartitionBookCallee,
  RpcUpdatePartitionValueCallee,
)
from .dist_server import DistServer, StoreMeta, get_server, init_server, wait_and_shutdown_server
from .dist_subgraph_loader import DistSubGraphLoader
from .remote_store import RemoteFeatureStore, RemoteGraphStore, remote_stores
from .runtime.client import async_request_server, init_client, request_server, shutdown_client
from .runtime.context import (
  DistContext,
  DistRole,
  assign_server_by_order,
  get_clients_to_servers,
  get_context,
  init_worker_group,
)
from .runtime.event_loop import ConcurrentEventLoop, wrap_torch_future
from .runtime.rpc import (
  RpcCalleeBase,
  RpcDataPartitionRouter,
  all_gather,
  barrier,
  get_rpc_master_addr,
  get_rpc_master_port,
  global_all_gather,
  global_barrier,
  init_rpc,
  rpc_global_request,
  rpc_global_request_async,
  rpc_global_request_by_rank,
  rpc_is_initialized,
  rpc_register,
  rpc_request,
  rpc_request_async,
  rpc_serve,
  rpc_sync_data_partitions,
  shutdown_rpc,
)
from .runtime.service import rpc_service_request_async
from .sampling.neighbor_sampler import DistNeighborSampler
from .sampling.partition_service import PartitionService
from .sampling.peer_requests import RpcSamplingCallee
from .sources.base import BatchSource
from .sources.collocated import DistCollocatedSamplingProducer
from .sources.multiprocess import DistMpSamplingProducer, MpCommand
from .sources.options import (
  AllDistSamplingWorkerOptions,
  CollocatedDistSamplingWorkerOptions,
  MpDistSamplingWorkerOptions,
  RemoteDistSamplingWorkerOptions,
)
from .sources.remote import RemoteBatchSource
from .sources.server import DistServerSamplingProducer

__all__ = [
  'AllDistSamplingWorkerOptions',
  'BatchSource',
  'DistCollocatedSamplingProducer',
  'RemoteBatchSource',
  'rpc_serve',
  'rpc_service_request_async',
  'DistServer',
  'DistServerSamplingProducer',
  'RemoteDistSamplingWorkerOptions',
  'assign_server_by_order',
  'async_request_server',
  'get_clients_to_servers',
  'get_server',
  'RemoteFeatureStore',
  'RemoteGraphStore',
  'remote_stores',
  'StoreMeta',
  'init_client',
  'init_server',
  'request_server',
  'shutdown_client',
  'wait_and_shutdown_server',
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
  'DistPartitionManager',
  'DistRandomPartitioner',
  'RpcUpdatePartitionBookCallee',
  'RpcUpdatePartitionValueCallee',
  'DistRole',
  'DistSubGraphLoader',
  'MpCommand',
  'MpDistSamplingWorkerOptions',
  'PartitionService',
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
  'rpc_global_request',
  'rpc_global_request_async',
  'rpc_global_request_by_rank',
  'rpc_register',
  'rpc_request',
  'rpc_request_async',
  'rpc_sync_data_partitions',
  'shutdown_rpc',
  'wrap_torch_future',
]
