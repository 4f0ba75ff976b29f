"""Channels that carry sampled messages from sampler processes to trainers."""

from .base import (
  ChannelBase,
  ChannelClosedError,
  DeferredTensor,
  QueueTimeoutError,
  SampleMessage,
  message_nbytes,
)
from .device_mirror import DeviceMirror
from .mp_channel import MpChannel
from .remote_channel import RemoteReceivingChannel
from .shm_channel import ShmChannel

__all__ = [
  'ChannelBase',
  'ChannelClosedError',
  'DeferredTensor',
  'DeviceMirror',
  'MpChannel',
  'QueueTimeoutError',
  'RemoteReceivingChannel',
  'SampleMessage',
  'message_nbytes',
  'ShmChannel',
]
