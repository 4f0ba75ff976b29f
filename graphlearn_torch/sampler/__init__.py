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
  SamplerOutput,
  SamplingConfig,
  SamplingType,
)
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
  'SamplerOutput',
  'SamplingConfig',
  'SamplingType',
]
