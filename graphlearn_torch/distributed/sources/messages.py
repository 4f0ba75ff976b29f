"""A sampled batch made a channel message: what every batch source does
with a ``DistNeighborSampler``'s output before it hands the batch on.

The sampler samples (``sampling.neighbor_sampler``); the batch is held by
type (``batch.sampled``), given its features and labels from every
partition (``batch.features`` over ``DistFeature``) and encoded
(``batch.codec``), as a single machine's loader does it in one process.
"""

from typing import Optional

import torch

from ...batch.codec import encode, with_edge_indices
from ...batch.features import RowLookup, collect_features
from ...batch.sampled import SampledBatch
from ...channel import SampleMessage
from ...sampler.base import SamplingConfig, SamplingType
from ...sampler.schema import RandomStream
from ..data.dataset import DistDataset
from ..data.feature import DistFeature
from ..runtime.event_loop import wrap_torch_future
from ..sampling.neighbor_sampler import DistNeighborSampler
from ..sampling.partition_service import PartitionService


class MessageSampler:
  r"""Samples batches into channel messages: a coroutine per batch, which a
  batch source runs on its event loop.

  Args:
    sampler: the sampler.
    collect_features: gather node (and edge) features and labels into the
      messages.
    into_shm_channel: the messages are bound for a ``ShmChannel``: their
      feature rows, and each edge type's rows and cols as one ``[2, E]``
      entry (``with_edge_indices``), are
      :class:`~graphlearn_torch.channel.DeferredTensor` entries, written
      straight into the channel's shared memory when the message is sent.
    on_device: a message may hold tensors on the sampler's GPU (a batch
      sampled there, for a consumer in this process that wants it on the
      GPU, or a ``ShmChannel``, which copies it out); else every tensor of
      a message is on the host (one sent over RPC).
  """

  def __init__(
    self,
    sampler: DistNeighborSampler,
    collect_features: bool = False,
    into_shm_channel: bool = False,
    on_device: bool = False,
  ):
    self.sampler = sampler
    self.collect_features = collect_features
    self.into_shm_channel = into_shm_channel
    self.on_device = on_device

  @classmethod
  def from_config(
    cls,
    data: DistDataset,
    config: SamplingConfig,
    seed: Optional[int] = None,
    service: Optional[PartitionService] = None,
    into_shm_channel: bool = False,
    on_device: bool = False,
  ) -> 'MessageSampler':
    r"""The message sampler of a loader's ``SamplingConfig``.

    Args:
      data: this process's partition.
      config: the loader's sampling configuration.
      seed: seeds the sampler's random stream (default: the config's).
      service: this process's PartitionService (default: build one; then
        collective, see ``DistNeighborSampler``).
      into_shm_channel: see the class.
      on_device: see the class.
    """
    sampler = DistNeighborSampler.from_config(data, config, seed, service)
    return cls(sampler, config.collect_features, into_shm_channel, on_device)

  def _rows(self, feature: Optional[DistFeature]) -> Optional[RowLookup]:
    if feature is None:
      return None
    return feature.async_deferred if self.into_shm_channel else feature.async_get

  async def message(
    self,
    sampling_type: SamplingType,
    inputs,
    input_id: Optional[torch.Tensor] = None,
    random: Optional[RandomStream] = None,
  ) -> SampleMessage:
    r"""Samples one batch of ``inputs`` into its message (a coroutine).

    Args:
      sampling_type: what to sample (``DistNeighborSampler.sample``).
      inputs: the seeds.
      input_id: the seeds' positions among their loader's seeds, which the
        message carries.
      random: the batch's random stream (``RandomStream.for_batch``).
    """
    # The ranges name a batch's steps in a profile (torch.profiler); the
    # coroutine may be suspended inside one, so they time its whole span.
    with torch.profiler.record_function('glt::sample_batch'):
      out = await self.sampler.sample(sampling_type, inputs, random)
    batch = SampledBatch.from_output(out)
    batch.input_id = input_id
    if self.collect_features:
      service = self.sampler.service
      with torch.profiler.record_function('glt::collect_features'):
        await wrap_torch_future(
          collect_features(
            batch,
            self.sampler.data,
            node_rows=self._rows(service.node_feature),
            edge_rows=self._rows(service.edge_feature),
          )
        )
    with torch.profiler.record_function('glt::encode_batch'):
      msg = encode(batch)
      if self.into_shm_channel:
        msg = with_edge_indices(msg)
      return msg if self.on_device else on_host(msg)


def on_host(msg: SampleMessage) -> SampleMessage:
  r"""``msg`` with its GPU tensors copied to the host (the others as they are)."""
  return {k: v.cpu() if isinstance(v, torch.Tensor) and v.is_cuda else v for k, v in msg.items()}
