"""DistLoader: batches sampled across partitions, collated to PyG data."""

import logging
from typing import Optional, Union

import torch
from torch_geometric.data import Data, HeteroData

from ..channel import SampleMessage, ShmChannel
from ..loader.base import SeedBatcher
from ..loader.link_loader import attach_link_metadata
from ..sampler.base import EdgeSamplerInput, NodeSamplerInput, SamplingConfig, SamplingType
from ..utils.device import resolve_device
from .dist_context import get_context
from .dist_dataset import DistDataset
from .dist_neighbor_sampler import DistNeighborSampler
from .dist_options import (
  CollocatedDistSamplingWorkerOptions,
  MpDistSamplingWorkerOptions,
  _BasicDistSamplingWorkerOptions,
)
from .dist_sampling_producer import INPUT_ID_KEY, DistMpSamplingProducer, raise_if_error
from .message import message_to_data
from .rpc import init_rpc, rpc_is_initialized

logger = logging.getLogger(__name__)

LOADER_SAMPLING_TYPES = (SamplingType.NODE, SamplingType.LINK, SamplingType.SUBGRAPH)


class DistLoader:
  r"""Iterates over batches of seeds, sampled across the partitions of a
  distributed dataset, as PyG ``Data`` / ``HeteroData``.

  Args:
    data: this process's partition.
    input_data: the seeds this process iterates over (seed edges for link
      sampling).
    sampling_config: what to sample and how to batch it.
    to_device: where batches go.
    worker_options: where sampling runs (default: collocated, in this
      process).
  """

  def __init__(
    self,
    data: Optional[DistDataset],
    input_data: Union[NodeSamplerInput, EdgeSamplerInput],
    sampling_config: SamplingConfig,
    to_device: Optional[torch.device] = None,
    worker_options: Optional[_BasicDistSamplingWorkerOptions] = None,
  ):
    if get_context() is None:
      raise RuntimeError('join a worker group first: glt.distributed.init_worker_group(...)')
    if sampling_config.sampling_type not in LOADER_SAMPLING_TYPES:
      raise ValueError(
        f'{sampling_config.sampling_type} is not a distributed sampling type; '
        f'supported: {[t.name for t in LOADER_SAMPLING_TYPES]}'
      )
    self.data = data
    self.input_data = input_data
    self.sampling_config = sampling_config
    self.to_device = resolve_device(to_device if to_device is not None else 'cpu')
    self.worker_options = worker_options or CollocatedDistSamplingWorkerOptions()
    self.batch_size = sampling_config.batch_size
    self._batcher = SeedBatcher.from_config(len(input_data), sampling_config)
    self._batches = None
    self._sampler = self._producer = self._channel = None
    self._remaining = 0
    self._failed = False
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
    cfg = self.sampling_config
    self._sampler = DistNeighborSampler(
      self.data,
      cfg.num_neighbors,
      with_edge=cfg.with_edge,
      with_neg=cfg.with_neg,
      with_weight=cfg.with_weight,
      edge_dir=cfg.edge_dir,
      collect_features=cfg.collect_features,
      concurrency=1,
      seed=cfg.seed,
    )

  def __len__(self) -> int:
    return len(self._batcher)

  def __iter__(self) -> 'DistLoader':
    if self._producer is not None:
      while self._remaining > 0:  # the last epoch was left unfinished
        self._recv()
      self._remaining = self._producer.produce_all()
    else:
      self._batches = iter(self._batcher)
    return self

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
    if self._producer is not None:
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

  def _collate_fn(self, msg: SampleMessage, index: torch.Tensor) -> Union[Data, HeteroData]:
    input_type = self.input_data.input_type
    data, metadata = message_to_data(msg, input_type)
    if self.sampling_config.sampling_type == SamplingType.LINK:
      data = attach_link_metadata(data, metadata, input_type, index)
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

  def __enter__(self) -> 'DistLoader':
    return self

  def __exit__(self, *exc) -> None:
    self.shutdown()

  def __del__(self):
    try:
      self.shutdown()
    except Exception:  # interpreter exit: nothing left to report to
      pass
