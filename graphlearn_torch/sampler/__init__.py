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
from .pyg_sampler import PyGNeighborSampler
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
