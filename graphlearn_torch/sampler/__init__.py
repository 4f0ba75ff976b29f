"""Samplers: inputs, outputs, the multi-hop engine and the neighbor sampler."""

from .base import (
  BaseSampler,
  CastMixin,
  EdgeIndex,
  EdgeSamplerInput,
  HeteroSamplerOutput,
  HopResult,
  NegativeSampling,
  NegativeSamplingMode,
  NeighborOutput,
  NodeSamplerInput,
  RemoteNodePathSamplerInput,
  RemoteNodeSplitSamplerInput,
  RemoteSamplerInput,
  SamplerOutput,
  SamplingConfig,
  SamplingType,
)
from .link import LinkBatch
from .multihop import HopRequest, MultiHopSampler
from .negative_sampler import RandomNegativeSampler
from .neighbor_sampler import NeighborSampler
from .one_hop import sample_one_hop
from .schema import RandomStream, SamplingSchema

__all__ = [
  'BaseSampler',
  'CastMixin',
  'EdgeIndex',
  'EdgeSamplerInput',
  'HeteroSamplerOutput',
  'HopRequest',
  'HopResult',
  'LinkBatch',
  'MultiHopSampler',
  'RandomStream',
  'SamplingSchema',
  'sample_one_hop',
  'NegativeSampling',
  'NegativeSamplingMode',
  'NeighborOutput',
  'NeighborSampler',
  'NodeSamplerInput',
  'PyGNeighborSampler',
  'RandomNegativeSampler',
  'RemoteNodePathSamplerInput',
  'RemoteNodeSplitSamplerInput',
  'RemoteSamplerInput',
  'SamplerOutput',
  'SamplingConfig',
  'SamplingType',
]


def __getattr__(name: str):
  # PyG's sampler interface (pyg_sampler) imports PyG, which takes seconds: it is
  # imported on first use, so that importing the package (as every sampling
  # process does) does not.
  if name in ('PyGNeighborSampler',):
    from . import pyg_sampler

    return getattr(pyg_sampler, name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
