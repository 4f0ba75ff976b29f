"""Server-client mode, the server side: processes that hold the partitions
and sample batches for remote training clients.

Servers and clients share one RPC world (servers take global ranks
``0..num_servers-1``). A client's loader asks each of its servers to create a
sampling producer, starts its epochs and fetches its batches (see
``dist_client``). The server destroys a client's producers when the client
leaves (``shutdown_client``) or dies, and exits when every client is gone.
"""

import logging
import threading
from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple, Union

import torch
from torch.distributed import rpc

from ...channel import ShmChannel
from ...sampler.base import (
  EdgeSamplerInput,
  NodeSamplerInput,
  RemoteSamplerInput,
  SamplingConfig,
)
from ...typing import EdgeType, NodeType
from ...utils.common import get_free_port
from ...utils.host_share import HostShareError
from ..data.dataset import DistDataset
from ..runtime.context import DistRole, get_context, init_server_context, set_context
from ..runtime.rpc import (
  DEFAULT_RPC_TIMEOUT_S,
  get_rpc_master_addr,
  get_rpc_worker_names,
  global_barrier,
  init_rpc,
  rpc_local_service,
  rpc_serve,
  shutdown_rpc,
)
from ..sampling.partition_service import PartitionService
from ..sources.options import MpDistSamplingWorkerOptions, RemoteDistSamplingWorkerOptions
from ..sources.server import DistServerSamplingProducer
from ..sources.server_pool import ServerSamplingPool

logger = logging.getLogger(__name__)

# How often a server checks that its clients live, and how long one may take
# to answer.
CLIENT_CHECK_INTERVAL_S = 2.0
CLIENT_CHECK_TIMEOUT_S = 10.0


@dataclass
class StoreMeta:
  r"""A server's answer to ``get_store_meta``.

  Args:
    num_nodes: nodes per node type (key None: a homogeneous graph).
    tensor_sizes: the whole-graph shape of each ``(node type, 'x' | 'y')``.
    edge_types: the edge types (``[None]``: a homogeneous graph).
    graph_caching: every server holds the whole graph, not its partition's
      edges.
  """

  num_nodes: Dict[Optional[NodeType], int]
  tensor_sizes: Dict[Tuple[Optional[NodeType], str], Tuple[int, ...]]
  edge_types: List[Optional[EdgeType]]
  graph_caching: bool


class DistServer:
  r"""A server: its partition, served to its peers and sampled for clients.

  Building one is collective among the servers (it builds the partition
  service); ``init_server`` does it.

  Args:
    dataset: this server's partition.
  """

  def __init__(self, dataset: DistDataset):
    self.dataset = dataset
    self.service = PartitionService(dataset)
    self._lock = threading.Lock()
    self._producers: Dict[int, DistServerSamplingProducer] = {}
    self._owners: Dict[int, Optional[int]] = {}  # producer id -> client rank
    self._next_producer_id = 0
    self._gone_clients: Set[int] = set()
    self._pool: Optional[ServerSamplingPool] = None  # its sampling processes, once started
    self._pool_lock = threading.Lock()  # held while they start
    self._pool_address: Optional[Tuple[str, int]] = None  # server 0: where pools meet
    self._exit = threading.Event()
    self._stop_watch = threading.Event()
    self._watcher = threading.Thread(
      target=self._watch_clients, name='glt-client-watch', daemon=True
    )
    self._watcher.start()

  # -- lifecycle ---------------------------------------------------------------

  def shutdown(self) -> None:
    r"""Stops watching the clients and destroys every producer."""
    self._stop_watch.set()
    if self._watcher.is_alive() and self._watcher is not threading.current_thread():
      self._watcher.join(CLIENT_CHECK_TIMEOUT_S + 1)
    with self._lock:
      ids = list(self._producers)
    for producer_id in ids:
      self.destroy_sampling_producer(producer_id)
    with self._pool_lock:
      pool, self._pool = self._pool, None
    if pool is not None:
      pool.shutdown()

  def wait_for_exit(self, timeout: Optional[float] = None) -> bool:
    r"""Waits until the server is told to exit or every client is gone;
    returns False on timeout."""
    return self._exit.wait(timeout)

  def exit(self) -> bool:
    r"""Lets ``wait_for_exit`` return."""
    self._exit.set()
    return True

  def client_exit(self, client_rank: int) -> bool:
    r"""Client ``client_rank`` leaves: its producers are destroyed."""
    self._client_gone(client_rank, 'left')
    return True

  def _client_gone(self, client_rank: int, why: str) -> None:
    with self._lock:
      if client_rank in self._gone_clients:
        return
      self._gone_clients.add(client_rank)
      ids = [p for p, owner in self._owners.items() if owner == client_rank]
      all_gone = len(self._gone_clients) >= get_context().num_clients()
    logger.info(
      'server %d: client %d %s; destroying its %d sampling producer(s)',
      get_context().rank,
      client_rank,
      why,
      len(ids),
    )
    for producer_id in ids:
      self.destroy_sampling_producer(producer_id)
    if all_gone:
      logger.info('server %d: every client is gone', get_context().rank)
      self.exit()

  def _watch_clients(self) -> None:
    r"""Pings the clients; one that does not answer is gone (a dead process
    fails the ping at once, a stuck one after ``CLIENT_CHECK_TIMEOUT_S``)."""
    names = get_rpc_worker_names().get(DistRole.CLIENT, [])
    ping = torch.zeros(1)
    while not self._stop_watch.wait(CLIENT_CHECK_INTERVAL_S):
      with self._lock:
        alive = [r for r in range(len(names)) if r not in self._gone_clients]
      # A builtin operator: the client answers without its Python interpreter.
      pings = []
      for rank in alive:
        try:
          fut = rpc.rpc_async(
            names[rank], torch.add, args=(ping, 1), timeout=CLIENT_CHECK_TIMEOUT_S
          )
        except Exception as e:  # the connection is known to be broken
          fut = torch.futures.Future()
          fut.set_exception(e)
        pings.append((rank, fut))
      for rank, fut in pings:
        try:
          fut.wait()
        except Exception as e:  # the client is gone; its producers go too
          if not self._stop_watch.is_set():
            self._client_gone(rank, f'stopped answering ({type(e).__name__}: {e})')

  # -- dataset -----------------------------------------------------------------

  def get_dataset_meta(self) -> Tuple[int, int, Optional[List[NodeType]], Optional[List[EdgeType]]]:
    r"""``(num_partitions, partition_idx, node types, edge types)``; the types
    are None for a homogeneous graph."""
    data = self.dataset
    return data.num_partitions, data.partition_idx, data.get_node_types(), data.get_edge_types()

  def get_store_meta(self) -> 'StoreMeta':
    r"""What a client's PyG stores (``remote_store``) serve: the tensors
    (node features 'x', labels 'y') by node type with their whole-graph
    sizes, the node counts, the edge types and whether this server holds the
    whole graph."""
    data = self.dataset
    hetero = data.get_edge_types() is not None
    ntypes = data.get_node_types() if hetero else [None]
    books = data.node_pb if isinstance(data.node_pb, dict) else {None: data.node_pb}
    num_nodes = {t: len(books[t]) for t in ntypes}
    sizes = {}
    for ntype in ntypes:
      features = data.get_node_feature(ntype)
      if features is not None:
        sizes[(ntype, 'x')] = (num_nodes[ntype], *features.shape[1:])
      labels = data.get_node_label(ntype)
      if labels is not None:
        sizes[(ntype, 'y')] = (num_nodes[ntype], *labels.shape[1:])
    return StoreMeta(
      num_nodes=num_nodes,
      tensor_sizes=sizes,
      edge_types=data.get_edge_types() if hetero else [None],
      graph_caching=bool(data.graph_caching),
    )

  def get_node_partition_id(self, node_type: Optional[NodeType], index: torch.Tensor):
    r"""The partition of each node of ``index``."""
    return self.service.dist_graph.get_node_partitions(index, node_type)

  def get_node_feature(self, node_type: Optional[NodeType], index: torch.Tensor):
    r"""A future of the feature rows of nodes ``index`` (of any partition)."""
    feature = self.service.node_feature
    if feature is None:
      raise ValueError('the dataset has no node features')
    return feature.async_get(index, node_type)

  def get_tensor_size(self, node_type: Optional[NodeType]) -> torch.Size:
    r"""The shape of this partition's node feature table of ``node_type``."""
    features = self.dataset.get_node_feature(node_type)
    if features is None:
      raise ValueError(f'the dataset has no node features of {node_type!r}')
    return features.shape

  def get_node_label(self, node_type: Optional[NodeType], index: torch.Tensor):
    r"""The labels of nodes ``index``."""
    labels = self.dataset.gather_node_labels(index, node_type)
    if labels is None:
      raise ValueError(f'the dataset has no labels of {node_type!r}')
    return labels

  def get_num_classes(self, node_type: Optional[NodeType] = None) -> int:
    r"""How many classes the labels of ``node_type`` have (the partition
    metadata's count, else the largest label plus one)."""
    known = (self.dataset.meta or {}).get('num_classes')
    if known:
      return int(known)
    labels = self.dataset.get_node_label(node_type)
    if labels is None:
      raise ValueError(f'the dataset has no labels of {node_type!r}')
    return int(labels.max()) + 1

  def _topology(self, edge_type: Optional[EdgeType], layout: str):
    if layout.lower() != 'coo':
      raise ValueError(f"only the 'coo' layout is served, got {layout!r}")
    graph = self.dataset.get_graph(edge_type)
    if graph is None:
      raise ValueError(f'the dataset has no graph of {edge_type!r}')
    return graph.topo

  def get_edge_index(self, edge_type: Optional[EdgeType], layout: str = 'coo'):
    r"""``(sources, destinations)`` of this partition's edges (global ids)."""
    src, dst, _, _ = self._topology(edge_type, layout).to_coo()
    return src, dst

  def get_edge_size(self, edge_type: Optional[EdgeType], layout: str = 'coo') -> int:
    r"""How many edges this partition stores."""
    return self._topology(edge_type, layout).edge_count

  # -- sampling producers --------------------------------------------------------

  def sampling_pool_address(
    self, master_addr: Optional[str] = None, master_port: Optional[int] = None
  ) -> Tuple[str, int]:
    r"""Where the servers' sampling processes meet (asked of server 0): the
    first caller's ``master_addr`` and ``master_port``, by default this
    server's RPC address and a free port on it."""
    with self._lock:
      if self._pool_address is None:
        addr = master_addr or get_rpc_master_addr()
        self._pool_address = (addr, int(master_port or get_free_port(addr)))
      return self._pool_address

  def start_sampling_pool(
    self, worker_options: RemoteDistSamplingWorkerOptions, address: Tuple[str, int]
  ) -> int:
    r"""Starts this server's sampling processes (``worker_options.num_workers``
    of them), which meet every server's at ``address``, unless they are
    started already; returns how many it has. Every server must be asked
    at once (``RemoteBatchSource`` does)."""
    with self._pool_lock:  # a second caller waits for the first's start
      if self._pool is None:
        opts = worker_options
        options = MpDistSamplingWorkerOptions(
          num_workers=opts.num_workers,
          worker_concurrency=opts.worker_concurrency,
          master_addr=address[0],
          master_port=address[1],
          num_rpc_threads=opts.num_rpc_threads,
          rpc_timeout=opts.rpc_timeout,
        )
        ctx = get_context()
        pool = ServerSamplingPool(self.dataset, options, ctx.rank, ctx.num_servers())
        pool.start()
        self._pool = pool
      elif self._pool.num_workers != worker_options.num_workers:
        logger.info(
          'server %d: a loader asks for %d sampling processes; the %d started serve it',
          get_context().rank, worker_options.num_workers, self._pool.num_workers,
        )  # fmt: skip
      return self._pool.num_workers

  def create_sampling_producer(
    self,
    sampler_input: Union[NodeSamplerInput, EdgeSamplerInput, RemoteSamplerInput],
    sampling_config: SamplingConfig,
    worker_options: RemoteDistSamplingWorkerOptions,
    client_rank: Optional[int] = None,
    input_offset: int = 0,
    client_channel: Optional[Tuple[str, int, int]] = None,
  ) -> int:
    r"""Creates a producer that samples ``sampler_input`` as configured, in
    this server's sampling processes when the options ask for more than one
    and they are started (``start_sampling_pool``), else in this process;
    returns its id.

    Args:
      sampler_input: the seeds, or a RemoteSamplerInput read here.
      sampling_config: what to sample and how to batch it.
      worker_options: concurrency and buffer bounds.
      client_rank: the client that owns it (destroyed when it goes).
      input_offset: added to the batches' input ids.
      client_channel: the ``host_handle`` of the client's ShmChannel, on
        this host: the sampling processes send batches straight there (the
        client then fetches receipts of them).
    """
    if isinstance(sampler_input, RemoteSamplerInput):
      sampler_input = sampler_input.to_local_sampler_input(self.dataset)
    with self._lock:
      gone = client_rank is not None and client_rank in self._gone_clients
      producer_id = self._next_producer_id
      self._next_producer_id += 1
    if gone:
      raise RuntimeError(f'client {client_rank} has left this server')
    pool = self._pool if worker_options.num_workers > 1 else None
    channel = _open_client_channel(client_channel) if pool is not None else None
    producer = DistServerSamplingProducer(
      self.service, sampler_input, sampling_config, worker_options, input_offset, pool,
      producer_id, channel,
    )  # fmt: skip
    with self._lock:
      gone = client_rank is not None and client_rank in self._gone_clients
      if not gone:
        self._producers[producer_id] = producer
        self._owners[producer_id] = client_rank
    if gone:
      producer.shutdown()
      raise RuntimeError(f'client {client_rank} has left this server')
    logger.info(
      'server %d: producer %d for client %s (%s, %d seeds, %d batches an epoch, %s, %s)',
      get_context().rank,
      producer_id,
      client_rank,
      worker_options.worker_key or sampling_config.sampling_type.name,
      len(sampler_input),
      len(producer),
      f'{pool.num_workers} sampling processes' if pool else 'sampled in the server',
      'straight to the client' if channel is not None else 'sent by the server',
    )
    return producer_id

  def _producer(self, producer_id: int) -> DistServerSamplingProducer:
    with self._lock:
      producer = self._producers.get(producer_id)
    if producer is None:
      raise ValueError(f'server {get_context().rank} has no sampling producer {producer_id}')
    return producer

  def get_sampling_producer_size(self, producer_id: int) -> Tuple[int, int]:
    r"""``(seeds, batches an epoch)`` of a producer."""
    producer = self._producer(producer_id)
    return len(producer.sampler_input), len(producer)

  def destroy_sampling_producer(self, producer_id: int) -> bool:
    r"""Stops a producer and frees its buffer (idempotent)."""
    with self._lock:
      producer = self._producers.pop(producer_id, None)
      self._owners.pop(producer_id, None)
    if producer is not None:
      producer.shutdown()
    return True

  def start_new_epoch_sampling(
    self, producer_id: int, epoch: int, start: int = 0, seed: Optional[int] = None
  ) -> int:
    r"""Starts epoch ``epoch`` of a producer from batch position ``start``
    (with the client loader's ``seed``, when given); returns how many
    batches it will give."""
    return self._producer(producer_id).start_epoch(epoch, start, seed)

  def fetch_one_sampled_message(self, producer_id: int) -> torch.futures.Future:
    r"""A future of a producer's next batch."""
    return self._producer(producer_id).fetch()


def _open_client_channel(handle: Optional[Tuple[str, int, int]]) -> Optional[ShmChannel]:
  r"""The client's channel of ``handle``; None without one, or where it
  cannot be opened (the batches then go through this server)."""
  if handle is None:
    return None
  try:
    return ShmChannel.open_host_handle(handle)
  except (HostShareError, RuntimeError) as e:
    logger.info('the client channel %s stays closed (%s): batches go through the server', handle, e)
    return None


def get_server() -> Optional[DistServer]:
  r"""This process's DistServer, or None when it is not a server."""
  server = rpc_local_service()
  return server if isinstance(server, DistServer) else None


def init_server(
  num_servers: int,
  server_rank: int,
  dataset: DistDataset,
  master_addr: str,
  master_port: int,
  num_clients: int = 0,
  num_rpc_threads: int = 16,
  request_timeout: float = DEFAULT_RPC_TIMEOUT_S,
  server_group_name: Optional[str] = None,
  is_dynamic: bool = False,
) -> DistServer:
  r"""Makes this process server ``server_rank`` of ``num_servers``, serving
  ``dataset`` (its partition) to ``num_clients`` clients. Returns when every
  server and client has joined.

  Args:
    num_servers: servers in the job.
    server_rank: this server's rank (its global rank too).
    dataset: the partition it holds.
    master_addr: the job's rendezvous address (server 0's host).
    master_port: its port.
    num_clients: clients in the job (> 0: the RPC world is fixed at start).
    num_rpc_threads: threads that serve requests.
    request_timeout: seconds a request may take.
    server_group_name: the servers' group name.
    is_dynamic: unsupported; must be False.
  """
  if is_dynamic:
    raise ValueError('dynamic server-client worlds (is_dynamic=True) are not supported')
  if not isinstance(num_clients, int) or num_clients < 1:
    raise ValueError(
      f'num_clients must be a positive integer, got {num_clients!r}: servers and clients '
      'form one RPC world, fixed when it starts'
    )
  if get_server() is not None:
    raise RuntimeError('this process is a server already')
  if dataset.num_partitions > num_servers:
    raise ValueError(
      f'{num_servers} servers cannot hold {dataset.num_partitions} partitions: every '
      'partition needs a server'
    )
  init_server_context(num_servers, server_rank, num_clients, server_group_name)
  init_rpc(master_addr, master_port, num_rpc_threads, request_timeout)
  server = DistServer(dataset)
  rpc_serve(server)  # clients call its methods by name
  global_barrier()  # clients send requests only once every server is ready
  logger.info('server %d of %d ready for %d clients', server_rank, num_servers, num_clients)
  return server


def wait_and_shutdown_server(timeout: Optional[float] = None) -> None:
  r"""Serves until every client has left (or died), then shuts down.

  Args:
    timeout: the longest wait in seconds (default: none; a dead client is
      noticed within seconds, so the wait ends when the clients do).
  """
  server = get_server()
  if server is None:
    raise RuntimeError('this process is not a server: call init_server first')
  try:
    if not server.wait_for_exit(timeout):
      rank = get_context().rank
      logger.warning('server %d: clients still there after %s s; exiting', rank, timeout)
  finally:
    server.shutdown()
    shutdown_rpc(graceful=False)
    set_context(None)
