"""DistLoader: batches sampled across partitions, collated to PyG data."""

import logging
from typing import List, Optional, Tuple, Union

import torch
from torch_geometric.data import Data, HeteroData

from ..channel import RemoteReceivingChannel, SampleMessage, ShmChannel
from ..loader.base import SeedBatcher
from ..loader.link_loader import attach_link_metadata
from ..loader.node_loader import resolve_input_nodes
from ..sampler.base import (
  EdgeSamplerInput,
  NodeSamplerInput,
  RemoteNodePathSamplerInput,
  RemoteNodeSplitSamplerInput,
  RemoteSamplerInput,
  SamplingConfig,
  SamplingType,
)
from ..typing import Split
from ..utils.device import resolve_device
from .dist_client import async_request_server
from .dist_context import assign_server_by_order, get_context
from .dist_dataset import DistDataset
from .dist_neighbor_sampler import DistNeighborSampler
from .dist_options import (
  CollocatedDistSamplingWorkerOptions,
  MpDistSamplingWorkerOptions,
  RemoteDistSamplingWorkerOptions,
  _BasicDistSamplingWorkerOptions,
)
from .dist_sampling_producer import INPUT_ID_KEY, DistMpSamplingProducer, raise_if_error
from .dist_server import DistServer
from .message import message_to_data
from .rpc import init_rpc, rpc_is_initialized

logger = logging.getLogger(__name__)

LOADER_SAMPLING_TYPES = (SamplingType.NODE, SamplingType.LINK, SamplingType.SUBGRAPH)


def node_input(
  data: Optional[DistDataset], input_nodes
) -> Union[NodeSamplerInput, RemoteSamplerInput, List[RemoteSamplerInput]]:
  r"""A node loader's input: the seeds of ``input_nodes`` (see
  ``resolve_input_nodes``), or a RemoteSamplerInput (or a list of them) as
  given. On a client (``data`` None) also GLT's remote forms, optionally as
  ``(node type, ...)``: a ``Split`` (each server's own split), a seed-file
  path (read by each server) or a list of paths (one per server)."""
  if isinstance(input_nodes, RemoteSamplerInput) or (
    isinstance(input_nodes, list) and input_nodes and isinstance(input_nodes[0], RemoteSamplerInput)
  ):
    return input_nodes
  if data is None:
    remote = remote_node_input(input_nodes)
    if remote is not None:
      return remote
  input_type, seeds = resolve_input_nodes(data, input_nodes)
  return NodeSamplerInput(seeds, input_type)


def remote_node_input(input_nodes) -> Union[None, RemoteSamplerInput, List[RemoteSamplerInput]]:
  r"""GLT's server-side seeds: ``Split``, a path, a list of paths, or
  ``(node type, one of those)``; None for seeds given as ids."""
  input_type, seeds = None, input_nodes
  if isinstance(input_nodes, tuple) and len(input_nodes) == 2 and isinstance(input_nodes[0], str):
    input_type, seeds = input_nodes
  if isinstance(seeds, Split):
    return RemoteNodeSplitSamplerInput(seeds, input_type)
  if isinstance(seeds, str):
    return RemoteNodePathSamplerInput(seeds, input_type)
  if isinstance(seeds, (list, tuple)) and seeds and all(isinstance(p, str) for p in seeds):
    return [RemoteNodePathSamplerInput(p, input_type) for p in seeds]
  return None


class DistLoader:
  r"""Iterates over batches of seeds, sampled across the partitions of a
  distributed dataset, as PyG ``Data`` / ``HeteroData``.

  Args:
    data: this process's partition (None on a client: servers hold them).
    input_data: the seeds this process iterates over (seed edges for link
      sampling). On a client: seeds that are split among its servers, a
      RemoteSamplerInput that each server reads from its partition, or a
      list of inputs, one per server.
    sampling_config: what to sample and how to batch it.
    to_device: where batches go.
    worker_options: where sampling runs (default: collocated, in this
      process).
  """

  def __init__(
    self,
    data: Optional[DistDataset],
    input_data: Union[
      NodeSamplerInput, EdgeSamplerInput, RemoteSamplerInput, List[RemoteSamplerInput]
    ],
    sampling_config: SamplingConfig,
    to_device: Optional[torch.device] = None,
    worker_options: Optional[_BasicDistSamplingWorkerOptions] = None,
  ):
    ctx = get_context()
    if ctx is None:
      raise RuntimeError(
        'join a distributed job first: glt.distributed.init_worker_group(...) (worker mode) '
        'or init_client(...) (server-client mode)'
      )
    if sampling_config.sampling_type not in LOADER_SAMPLING_TYPES:
      raise ValueError(
        f'{sampling_config.sampling_type} is not a distributed sampling type; '
        f'supported: {[t.name for t in LOADER_SAMPLING_TYPES]}'
      )
    self.data = data
    self.input_data = input_data
    self.sampling_config = sampling_config
    self.to_device = resolve_device(to_device if to_device is not None else 'cpu')
    if worker_options is None:
      worker_options = (
        RemoteDistSamplingWorkerOptions()
        if ctx.is_client()
        else CollocatedDistSamplingWorkerOptions()
      )
    self.worker_options = worker_options
    self.batch_size = sampling_config.batch_size
    self._batches = None
    self._sampler = self._producer = self._channel = None
    self._servers: List[int] = []
    self._producer_ids: List[int] = []
    self._epoch = -1
    self._remaining = 0
    self._failed = False
    if ctx.is_client() != isinstance(self.worker_options, RemoteDistSamplingWorkerOptions):
      raise ValueError(
        'clients sample on servers, with RemoteDistSamplingWorkerOptions; workers sample '
        f'themselves; this {ctx.role.name.lower()} got {type(self.worker_options).__name__}'
      )
    if isinstance(self.worker_options, RemoteDistSamplingWorkerOptions):
      self._init_remote()
      return
    self._batcher = SeedBatcher.from_config(len(input_data), sampling_config)
    if isinstance(self.worker_options, MpDistSamplingWorkerOptions):
      self._init_mp()
    elif isinstance(self.worker_options, CollocatedDistSamplingWorkerOptions):
      self._init_collocated()
    else:
      raise NotImplementedError(f'{type(self.worker_options).__name__} is not built yet')

  def _init_mp(self) -> None:
    opts = self.worker_options
    capacity = max(8, 2 * opts.num_workers * opts.worker_concurrency)
    self._channel = ShmChannel(capacity, opts.channel_size)
    if opts.pin_memory:
      self._channel.pin_memory()
    self._producer = DistMpSamplingProducer(
      self.data, self.input_data, self.sampling_config, opts, self._channel
    )
    self._producer.init()

  def _init_collocated(self) -> None:
    opts = self.worker_options
    if not rpc_is_initialized():
      if opts.master_addr is None or opts.master_port is None:
        raise ValueError(
          'RPC is not initialized: call glt.distributed.init_rpc first, or give the worker '
          'options master_addr and master_port'
        )
      init_rpc(opts.master_addr, opts.master_port, opts.num_rpc_threads or 16, opts.rpc_timeout)
    self._sampler = DistNeighborSampler.from_config(self.data, self.sampling_config)

  def _server_inputs(self) -> List[Tuple[int, object, int]]:
    r"""``(server rank, its input, the offset of its input ids)`` per server.

    Seeds given here are split evenly among the servers, and a batch's input
    ids index them; those of a RemoteSamplerInput (or of a list of inputs)
    index the server's own seeds."""
    opts = self.worker_options
    servers = opts.server_rank if opts.server_rank is not None else assign_server_by_order()
    servers = [servers] if isinstance(servers, int) else list(servers)
    num_servers = get_context().num_servers()
    bad = [s for s in servers if s >= num_servers]
    if bad:
      raise ValueError(f'server_rank {bad} is outside the {num_servers} servers')
    inputs = self.input_data
    if isinstance(inputs, (list, tuple)):
      if len(inputs) != len(servers):
        raise ValueError(f'{len(inputs)} inputs for {len(servers)} servers: give one per server')
      return [(s, inp, 0) for s, inp in zip(servers, inputs)]
    if isinstance(inputs, RemoteSamplerInput):  # each server reads its own
      return [(s, inputs, 0) for s in servers]
    bounds = torch.linspace(0, len(inputs), len(servers) + 1).long().tolist()
    return [(s, inputs[torch.arange(lo, hi)], lo) for s, lo, hi in zip(servers, bounds, bounds[1:])]

  def _init_remote(self) -> None:
    opts = self.worker_options
    ctx = get_context()
    placed = self._server_inputs()
    created = []
    for server, inputs, offset in placed:
      fut = async_request_server(
        server,
        DistServer.create_sampling_producer,
        inputs,
        self.sampling_config,
        opts,
        client_rank=ctx.rank,
        input_offset=offset,
      )
      created.append((server, fut))
    self._servers, self._producer_ids = [], []
    try:
      errors = []
      for server, fut in created:
        try:
          self._producer_ids.append(fut.wait())
          self._servers.append(server)
        except Exception as e:  # destroy the others' producers first
          errors.append(e)
      if errors:
        raise errors[0]
      sizes = self._on_producers(DistServer.get_sampling_producer_size)
    except BaseException:
      self._failed = True
      self.shutdown()
      raise
    self._num_batches = sum(n for _, n in sizes)
    self._channel = RemoteReceivingChannel(self._servers, self._producer_ids, opts.prefetch_size)

  def _on_producers(self, method, *args) -> List:
    r"""``method(producer id, *args)`` on each of the loader's servers, at
    once; the results in server order. A failure names its server."""
    futures = [
      (s, async_request_server(s, method, p, *args))
      for s, p in zip(self._servers, self._producer_ids)
    ]
    results = []
    for server, fut in futures:
      try:
        results.append(fut.wait())
      except Exception as e:
        raise RuntimeError(
          f'server {server} failed to answer {method.__name__}: {type(e).__name__}: {e}'
        ) from e
    return results

  def __len__(self) -> int:
    if self._servers:
      return self._num_batches
    return len(self._batcher)

  def __iter__(self) -> 'DistLoader':
    if self._servers:
      self._start_remote_epoch()
    elif self._producer is not None:
      while self._remaining > 0:  # the last epoch was left unfinished
        self._recv()
      self._remaining = self._producer.produce_all()
    else:
      self._batches = iter(self._batcher)
    return self

  def _start_remote_epoch(self) -> None:
    timeout = self.worker_options.rpc_timeout
    if not self._channel.drain(timeout):  # the last epoch was left unfinished
      raise TimeoutError(f'the servers did not answer within {timeout} s')
    self._epoch += 1
    counts = self._on_producers(DistServer.start_new_epoch_sampling, self._epoch)
    self._channel.reset(counts)
    self._remaining = sum(counts)

  def _recv(self) -> SampleMessage:
    try:
      msg = self._channel.recv(timeout_ms=self.worker_options.rpc_timeout * 1000)
      raise_if_error(msg)
    except BaseException:
      self._failed = True  # the samplers cannot finish the epoch: shut down at once
      raise
    self._remaining -= 1
    return msg

  def __next__(self) -> Union[Data, HeteroData]:
    if self._channel is not None:
      if self._remaining == 0:
        raise StopIteration
      msg = self._recv()
      return self._collate_fn(msg, msg.pop(INPUT_ID_KEY))
    if self._batches is None:
      self._batches = iter(self._batcher)
    index = next(self._batches)
    coro = self._sampler.sample_coroutine(
      self.sampling_config.sampling_type, self.input_data[index]
    )
    msg = self._sampler.run_task(coro, timeout=self.worker_options.rpc_timeout)
    return self._collate_fn(msg, index)

  @property
  def _input_type(self):
    inputs = self.input_data
    return (inputs[0] if isinstance(inputs, (list, tuple)) else inputs).input_type

  def _collate_fn(self, msg: SampleMessage, index: torch.Tensor) -> Union[Data, HeteroData]:
    input_type = self._input_type
    data, metadata = message_to_data(msg, input_type)
    if self.sampling_config.sampling_type == SamplingType.LINK:
      data = attach_link_metadata(data, metadata, input_type, index, self.sampling_config.edge_dir)
    else:
      store = data if isinstance(data, Data) else data[input_type]
      store.batch_size = index.numel()
      store.input_id = index
      if 'mapping' in metadata:
        store.mapping = metadata['mapping']
    return data.to(self.to_device) if self.to_device.type != 'cpu' else data

  def shutdown(self) -> None:
    r"""Stops the loader's sampling (idempotent)."""
    sampler = getattr(self, '_sampler', None)
    if sampler is not None:
      sampler.shutdown_loop()
      self._sampler = None
    producer = getattr(self, '_producer', None)
    if producer is not None:
      producer.shutdown(graceful=not getattr(self, '_failed', True))
      self._producer = None
    if getattr(self, '_producer_ids', None):
      self._destroy_remote_producers()

  def _destroy_remote_producers(self) -> None:
    ids, self._producer_ids = self._producer_ids, []
    ctx = get_context()
    if not rpc_is_initialized() or ctx is None or not ctx.is_client():
      return  # the client has left: the servers destroyed its producers
    futures = [
      (s, async_request_server(s, DistServer.destroy_sampling_producer, p))
      for s, p in zip(self._servers, ids)
    ]
    for server, fut in futures:
      try:
        fut.wait()
      except Exception as e:  # a dead server has nothing left to destroy
        logger.warning('server %d did not destroy its sampling producer: %s', server, e)

  def __enter__(self) -> 'DistLoader':
    return self

  def __exit__(self, *exc) -> None:
    self.shutdown()

  def __del__(self):
    try:
      self.shutdown()
    except Exception:  # interpreter exit: nothing left to report to
      pass
