"""A sampled batch on its way from the sampler to the trainer: which seeds
make it (``seeds``), the batch by type (``sampled``), its features and labels
(``features``), its channel message (``codec``), its PyG form (``pyg``), the
fields that say what it was sampled for (``labels``), and where a loader is
in its epochs, the state it resumes from (``progress``)."""

from .codec import SamplingError, decode, encode, encode_error, raise_if_error
from .features import collect_features, gather_batch
from .labels import attach_link_metadata, label_batch
from .progress import LoaderProgress, fingerprint
from .pyg import collate, to_data, to_hetero_data, to_pyg
from .sampled import EdgeBatch, NodeBatch, SampledBatch
from .seeds import SeedBatcher

__all__ = [
  'EdgeBatch',
  'LoaderProgress',
  'NodeBatch',
  'SampledBatch',
  'SamplingError',
  'SeedBatcher',
  'attach_link_metadata',
  'collate',
  'collect_features',
  'decode',
  'encode',
  'encode_error',
  'fingerprint',
  'gather_batch',
  'label_batch',
  'raise_if_error',
  'to_data',
  'to_hetero_data',
  'to_pyg',
]
