"""Samplers: inputs, outputs and the neighbor sampler."""

from .base import (
  BaseSampler,
  CastMixin,
  EdgeIndex,
  EdgeSamplerInput,
  HeteroSamplerOutput,
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
from .negative_sampler import RandomNegativeSampler
from .neighbor_sampler import NeighborSampler

__all__ = [
  'BaseSampler',
  'CastMixin',
  'EdgeIndex',
  'EdgeSamplerInput',
  'HeteroSamplerOutput',
  'NegativeSampling',
  'NegativeSamplingMode',
  'NeighborOutput',
  'NeighborSampler',
  'NodeSamplerInput',
  'RandomNegativeSampler',
  'RemoteNodePathSamplerInput',
  'RemoteNodeSplitSamplerInput',
  'RemoteSamplerInput',
  'SamplerOutput',
  'SamplingConfig',
  'SamplingType',
]
