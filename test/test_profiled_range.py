"""A batch's steps are named in a running profile (torch.profiler), and cost
nothing where none runs."""

import contextlib

import torch

from graphlearn_torch.distributed.sources.messages import profiled_range


def test_a_range_is_recorded_only_while_a_profile_runs():
  assert isinstance(profiled_range('glt::sample_batch'), contextlib.nullcontext)
  with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
    with profiled_range('glt::sample_batch'):
      torch.ones(3).sum()
  assert 'glt::sample_batch' in [event.name for event in profile.events()]
