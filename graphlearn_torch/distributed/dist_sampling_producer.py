"""GLT's import path of the sampling producers: where a distributed loader's
batches are sampled (see ``batch_source``)."""

from .collocated_producer import DistCollocatedSamplingProducer
from .mp_producer import DistMpSamplingProducer, MpCommand
from .server_producer import DistServerSamplingProducer

__all__ = [
  'DistCollocatedSamplingProducer',
  'DistMpSamplingProducer',
  'DistServerSamplingProducer',
  'MpCommand',
]
