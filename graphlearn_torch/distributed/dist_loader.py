"""DistLoader: batches sampled across partitions, collated to PyG data."""

import logging
from typing import Optional, Union

import torch
from torch_geometric.data import Data, HeteroData

from ..channel import SampleMessage
from ..loader.base import SeedBatcher
from ..sampler.base import NodeSamplerInput, SamplingConfig, SamplingType
from ..utils.device import resolve_device
from .dist_context import get_context
from .dist_dataset import DistDataset
from .dist_options import CollocatedDistSamplingWorkerOptions, _BasicDistSamplingWorkerOptions
from .message import message_to_data
from .rpc import init_rpc, rpc_is_initialized

logger = logging.getLogger(__name__)


class DistLoader:
  r"""Iterates over batches of seeds, sampled across the partitions of a
  distributed dataset, as PyG ``Data`` / ``HeteroData``.

  Args:
    data: this process's partition.
    input_data: the seeds this process iterates over.
    sampling_config: what to sample and how to batch it.
    to_device: where batches go.
    worker_options: where sampling runs (default: collocated, in this
      process).
  """

  def __init__(
    self,
    data: Optional[DistDataset],
    input_data: NodeSamplerInput,
    sampling_config: SamplingConfig,
    to_device: Optional[torch.device] = None,
    worker_options: Optional[_BasicDistSamplingWorkerOptions] = None,
  ):
    if get_context() is None:
      raise RuntimeError('join a worker group first: glt.distributed.init_worker_group(...)')
    if sampling_config.sampling_type != SamplingType.NODE:
      raise NotImplementedError(f'{sampling_config.sampling_type} sampling is not built yet')
    self.data = data
    self.input_data = input_data
    self.sampling_config = sampling_config
    self.to_device = resolve_device(to_device if to_device is not None else 'cpu')
    self.worker_options = worker_options or CollocatedDistSamplingWorkerOptions()
    self.batch_size = sampling_config.batch_size
    self._batcher = SeedBatcher(
      len(input_data),
      sampling_config.batch_size,
      sampling_config.shuffle,
      sampling_config.drop_last,
      sampling_config.seed,
    )
    self._batches = None
    if not isinstance(self.worker_options, CollocatedDistSamplingWorkerOptions):
      raise NotImplementedError(
        f'{type(self.worker_options).__name__} is not built yet; use '
        'CollocatedDistSamplingWorkerOptions'
      )
    self._init_collocated()

  def _init_collocated(self) -> None:
    from .dist_neighbor_sampler import DistNeighborSampler

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
      with_weight=cfg.with_weight,
      edge_dir=cfg.edge_dir,
      collect_features=cfg.collect_features,
      concurrency=1,
      seed=cfg.seed,
    )

  def __len__(self) -> int:
    return len(self._batcher)

  def __iter__(self) -> 'DistLoader':
    self._batches = iter(self._batcher)
    return self

  def __next__(self) -> Union[Data, HeteroData]:
    if self._batches is None:
      self._batches = iter(self._batcher)
    index = next(self._batches)
    seeds = self.input_data[index]
    msg = self._sampler.sample_from_nodes(seeds, timeout=self.worker_options.rpc_timeout)
    return self._collate_fn(msg, index)

  def _collate_fn(self, msg: SampleMessage, index: torch.Tensor) -> Union[Data, HeteroData]:
    input_type = self.input_data.input_type
    data, metadata = message_to_data(msg, input_type)
    store = data if isinstance(data, Data) else data[input_type]
    store.batch_size = index.numel()
    store.input_id = index
    return data.to(self.to_device) if self.to_device.type != 'cpu' else data

  def shutdown(self) -> None:
    r"""Stops the loader's sampling (idempotent)."""
    sampler = getattr(self, '_sampler', None)
    if sampler is not None:
      sampler.shutdown_loop()
      self._sampler = None

  def __enter__(self) -> 'DistLoader':
    return self

  def __exit__(self, *exc) -> None:
    self.shutdown()

  def __del__(self):
    try:
      self.shutdown()
    except Exception:  # interpreter exit: nothing left to report to
      pass
