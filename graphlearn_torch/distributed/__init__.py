"""Distributed graph learning: partitions, RPC, distributed sampling and loaders.

The package re-exports the public names of its floors (``runtime``,
``data``, ``sampling``, ``sources``, ``server``, ``loaders``); GLT's
``DistNeighborSampler`` is added here by ``compat``.
"""

from .data.dataset import DistDataset, default_id_filter, default_id_select
from .data.feature import DistFeature, RpcFeatureLookupCallee
from .data.graph import DistGraph
from .data.random_partitioner import (
  DistPartitionManager,
  DistRandomPartitioner,
  RpcUpdatePartitionBookCallee,
  RpcUpdatePartitionValueCallee,
)
from .loaders.link_neighbor_loader import DistLinkNeighborLoader
from .loaders.loader import DistLoader
from .loaders.neighbor_loader import DistNeighborLoader
from .loaders.subgraph_loader import DistSubGraphLoader
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
from .sampling.partition_service import PartitionService
from .sampling.peer_requests import RpcSamplingCallee
from .server.server import DistServer, StoreMeta, get_server, init_server, wait_and_shutdown_server
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


def __getattr__(name: str):
  # The client's PyG stores (remote_store) imports PyG, which takes seconds: it is
  # imported on first use, so that importing the package (as every sampling
  # process does) does not.
  if name in ('RemoteFeatureStore', 'RemoteGraphStore', 'remote_stores'):
    from .server import remote_store

    return getattr(remote_store, name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
