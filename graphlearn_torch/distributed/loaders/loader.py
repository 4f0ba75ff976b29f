"""DistLoader: batches sampled across partitions, collated to PyG data."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

import torch

from ...batch.codec import decode
from ...batch.progress import fingerprint
from ...batch.pyg import import_pyg
from ...channel import ShmChannel
from ...loader.base import BaseLoader
from ...loader.node_loader import resolve_input_nodes
from ...loader.options import LoaderOptions
from ...sampler.base import (
  EdgeSamplerInput,
  NodeSamplerInput,
  RemoteNodePathSamplerInput,
  RemoteNodeSplitSamplerInput,
  RemoteSamplerInput,
  SamplingConfig,
  SamplingType,
)
from ...typing import NumNeighbors, Split
from ...utils.device import resolve_device
from ..data.dataset import DistDataset
from ..runtime.context import get_context
from ..sources.base import BatchSource
from ..sources.collocated import DistCollocatedSamplingProducer
from ..sources.multiprocess import DistMpSamplingProducer
from ..sources.options import (
  CollocatedDistSamplingWorkerOptions,
  MpDistSamplingWorkerOptions,
  RemoteDistSamplingWorkerOptions,
  _BasicDistSamplingWorkerOptions,
)
from ..sources.remote import RemoteBatchSource

if TYPE_CHECKING:  # PyG is imported on first use: sampling processes never need it
  from torch_geometric.data import Data, HeteroData


LOADER_SAMPLING_TYPES = (SamplingType.NODE, SamplingType.LINK, SamplingType.SUBGRAPH)

# The positional parameters GLT's distributed loaders end with (the options
# of LoaderOptions, random_seed its seed, and the loader's own to_device and
# worker_options), and those of the node and subgraph loaders, which batching
# comes before.
SAMPLING = (
  'with_edge',
  'with_weight',
  'edge_dir',
  'collect_features',
  'to_device',
  'random_seed',
  'worker_options',
)
BATCHING_AND_SAMPLING = ('batch_size', 'shuffle', 'drop_last', *SAMPLING)


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


def sampling_config(
  sampling_type: SamplingType,
  num_neighbors: Optional[NumNeighbors],
  options: LoaderOptions,
  with_neg: bool = False,
) -> SamplingConfig:
  r"""The ``SamplingConfig`` of a distributed loader's options: what its
  batch sources (and servers) sample."""
  return SamplingConfig(
    sampling_type,
    num_neighbors,
    options.batch_size,
    options.shuffle,
    options.drop_last,
    options.with_edge,
    options.collect_features,
    with_neg=with_neg,
    with_weight=options.with_weight,
    edge_dir=options.edge_dir,
    seed=options.seed,
    time_attr=options.time_attr,
    temporal_strategy=options.temporal_strategy,
    disjoint=options.disjoint,
    subgraph_type=options.subgraph_type,
  )


class DistLoader(BaseLoader):
  r"""Iterates over batches of seeds, sampled across the partitions of a
  distributed dataset, as PyG ``Data`` / ``HeteroData``.

  Where sampling runs is the batch source's business (``sources``:
  collocated, multiprocess or remote, chosen by ``worker_options``); the
  loader decodes and collates what it supplies, with the lifecycle of every
  loader (``BaseLoader``: epochs, ``state_dict``).

  Args:
    data: this process's partition (None on a client: servers hold them).
    input_data: the seeds this process iterates over (seed edges for link
      sampling). On a client: seeds that are split among its servers, a
      RemoteSamplerInput that each server reads from its partition, or a
      list of inputs, one per server.
    sampling_config: what to sample and how to batch it.
    to_device: where batches go.
    worker_options: where sampling runs (default: collocated, in this
      process; on a client, its servers).
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
    self._source: Optional[BatchSource] = None
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
    # Batches are a function of the seed (RandomStream.for_batch): every
    # loader has one, and its sources (and servers) sample with it.
    self.sampling_config = sampling_config = sampling_config.seeded()
    self.to_device = resolve_device(to_device if to_device is not None else 'cpu')
    if worker_options is None:
      worker_options = (
        RemoteDistSamplingWorkerOptions()
        if ctx.is_client()
        else CollocatedDistSamplingWorkerOptions()
      )
    self.worker_options = worker_options
    self.batch_size = sampling_config.batch_size
    if ctx.is_client() != isinstance(worker_options, RemoteDistSamplingWorkerOptions):
      raise ValueError(
        'clients sample on servers, with RemoteDistSamplingWorkerOptions; workers sample '
        f'themselves; this {ctx.role.name.lower()} got {type(worker_options).__name__}'
      )
    source = self._create_source()
    source.init(meanwhile=import_pyg)
    self._source = source
    identity = functools.partial(self._identity, ctx.world_size, ctx.rank)
    super().__init__(len(source), identity, sampling_config.seed, self.to_device)

  def _identity(self, world_size: int, rank: int) -> Dict[str, Any]:
    r"""What a state loaded into this loader must match."""
    identity = {
      'dataset': fingerprint(self.data, [self.input_data]),
      'batch_size': self.sampling_config.batch_size,
      'world_size': world_size,
      'rank': rank,
    }
    if isinstance(self._source, RemoteBatchSource):
      identity['servers'] = list(self._source.servers)
    return identity

  def _create_source(self) -> BatchSource:
    opts = self.worker_options
    if isinstance(opts, RemoteDistSamplingWorkerOptions):
      return RemoteBatchSource(self.input_data, self.sampling_config, opts)
    if isinstance(opts, MpDistSamplingWorkerOptions):
      channel = ShmChannel(opts.channel_capacity, opts.channel_size)
      samples_on_gpus = any(torch.device(d).type == 'cuda' for d in opts.worker_devices or [])
      if samples_on_gpus and self.to_device.type == 'cuda':
        channel.share_cuda_tensors(self.to_device)  # batches stay on the GPU on their way here
      if opts.pin_memory and not channel.shares_cuda_tensors:
        # (page-locking backs every page of the channel; with the mirror its
        # host entries are a few KB a batch)
        channel.pin_memory()
      return DistMpSamplingProducer(self.data, self.input_data, self.sampling_config, opts, channel)
    if isinstance(opts, CollocatedDistSamplingWorkerOptions):
      return DistCollocatedSamplingProducer(
        self.data, self.input_data, self.sampling_config, opts, self.to_device
      )
    raise NotImplementedError(f'{type(opts).__name__} is not built yet')

  def _start_epoch(self, epoch: int, start: int, seed: int) -> None:
    self.sampling_config = dataclasses.replace(self.sampling_config, seed=seed)
    self._source.start_epoch(epoch, start, seed)

  def _next_batch(self) -> Union[Data, HeteroData]:
    msg = self._source.next_message()
    if msg is None:
      raise StopIteration
    batch = decode(msg)
    config = self.sampling_config
    return self._collate(
      batch, config.sampling_type, self._input_type, batch.input_id, config.edge_dir
    )

  @property
  def _input_type(self):
    inputs = self.input_data
    return (inputs[0] if isinstance(inputs, (list, tuple)) else inputs).input_type

  def shutdown(self) -> None:
    r"""Stops the loader's sampling (idempotent)."""
    source, self._source = getattr(self, '_source', None), None
    if source is not None:
      source.shutdown()

  def __enter__(self) -> DistLoader:
    return self

  def __exit__(self, *exc) -> None:
    self.shutdown()

  def __del__(self):
    try:
      self.shutdown()
    except Exception:  # interpreter exit: nothing left to report to
      pass
