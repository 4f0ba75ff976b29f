"""The channel message codec: sampled batches (and sampling errors) as flat
dicts of tensors, and back.

A message is what travels from a sampler to its trainer through a channel
(``ShmChannel``, RPC): a ``SampleMessage``, named tensors. Every key it may
hold is made here:

- ``node/{type}/{field}``: a :class:`~graphlearn_torch.batch.sampled.NodeBatch`
  field (``ids``, ``batch``, ``num_sampled``, ``x``, ``y``);
- ``edge/{src}|{rel}|{dst}/{field}``: an ``EdgeBatch`` field (``rows``,
  ``cols``, ``eids``, ``num_sampled``, ``attr``), or ``index`` for
  ``rows`` and ``cols`` as the two rows of one tensor (``with_edge_indices``);
- ``meta/{name}``: the batch's metadata;
- ``#hetero``: whether the batch is heterogeneous;
- ``#input_id``: the batch's seed positions among its loader's seeds;
- ``#place``: the batch's epoch and position in it, where its receiver
  puts batches back in order (``place_batch``, ``batch_place``);
- ``#error``: a sampling error's text (the whole message, instead of a batch).
"""

import dataclasses
import functools
from typing import Dict, Optional, Tuple, Union

import torch

from ..channel import DeferredTensor, SampleMessage
from ..typing import EdgeType, NodeType
from .sampled import EdgeBatch, NodeBatch, SampledBatch

HETERO_KEY = '#hetero'
INPUT_ID_KEY = '#input_id'
PLACE_KEY = '#place'
PRODUCER_KEY = '#producer'
RECEIPT_KEY = '#receipt'
ERROR_KEY = '#error'

_SEP = '/'
_ETYPE_SEP = '|'


class SamplingError(RuntimeError):
  r"""A batch could not be sampled: the error a sampler sent instead of it."""


def _type_key(t: Union[NodeType, EdgeType]) -> str:
  parts = (t,) if isinstance(t, str) else tuple(t)
  for part in parts:
    if _SEP in part or _ETYPE_SEP in part:
      raise ValueError(f"type names must not hold '{_SEP}' or '{_ETYPE_SEP}': {t!r}")
  return _ETYPE_SEP.join(parts)


def _put_fields(msg: SampleMessage, prefix: str, store) -> None:
  for f in dataclasses.fields(store):
    value = getattr(store, f.name)
    if value is not None and f.metadata.get('encoded', True):
      msg[prefix + f.name] = (
        torch.as_tensor(value, dtype=torch.int64) if isinstance(value, list) else value
      )


def encode(batch: SampledBatch) -> SampleMessage:
  r"""A sampled batch as a message."""
  msg: SampleMessage = {HETERO_KEY: torch.tensor(int(batch.hetero))}
  for ntype, node in batch.nodes.items():
    _put_fields(msg, f'node{_SEP}{_type_key(ntype)}{_SEP}', node)
  for etype, edge in batch.edges.items():
    _put_fields(msg, f'edge{_SEP}{_type_key(etype)}{_SEP}', edge)
  for name, value in batch.metadata.items():
    msg[f'meta{_SEP}{name}'] = value
  if batch.input_id is not None:
    msg[INPUT_ID_KEY] = batch.input_id
  return msg


def with_edge_indices(msg: SampleMessage) -> SampleMessage:
  r"""``msg`` (``encode``'s) with each edge type's ``rows`` and ``cols`` on
  the host as one ``index`` entry, ``[2, num_edges]``, that writes them into
  its place (a :class:`~graphlearn_torch.channel.DeferredTensor`): for a
  ``ShmChannel``, whose receiver then decodes rows and cols as the two rows
  of one tensor, and takes it as the batch's ``edge_index`` with no copy
  (``EdgeBatch.edge_index``)."""
  joined: SampleMessage = {}
  for key, value in msg.items():
    prefix, _, name = key.rpartition(_SEP)
    if not key.startswith('edge' + _SEP) or name not in ('rows', 'cols'):
      joined[key] = value
      continue
    rows, cols = msg.get(prefix + _SEP + 'rows'), msg.get(prefix + _SEP + 'cols')
    if not _joinable(rows, cols):
      joined[key] = value
    elif name == 'rows':
      write = functools.partial(_write_rows, rows, cols)
      joined[prefix + _SEP + 'index'] = DeferredTensor((2, rows.numel()), rows.dtype, write)
  return joined


def _joinable(rows, cols) -> bool:
  return (
    isinstance(rows, torch.Tensor)
    and isinstance(cols, torch.Tensor)
    and rows.device.type == cols.device.type == 'cpu'
    and rows.dtype == cols.dtype
    and rows.dim() == cols.dim() == 1
    and rows.numel() == cols.numel()
  )


def _write_rows(rows: torch.Tensor, cols: torch.Tensor, out: torch.Tensor) -> None:
  # memcpy on this thread (numpy's): Tensor.copy_ of a large tensor starts an
  # OpenMP region, whose threads spin beside busy processes after it
  for place, values in ((out[0], rows), (out[1], cols)):
    place.numpy()[:] = values.contiguous().numpy()


def encode_error(text: str) -> SampleMessage:
  r"""A message that carries a sampling error instead of a batch."""
  return {ERROR_KEY: torch.frombuffer(bytearray(text.encode()), dtype=torch.uint8)}


def error_text(msg: SampleMessage) -> Optional[str]:
  r"""The error a message carries, or None when it carries a batch."""
  if ERROR_KEY not in msg:
    return None
  return bytes(msg[ERROR_KEY].tolist()).decode(errors='replace')


def place_batch(msg: SampleMessage, epoch: int, position: int) -> SampleMessage:
  r"""Marks a batch's message with its epoch and its position in it."""
  msg[PLACE_KEY] = torch.tensor([epoch, position], dtype=torch.int64)
  return msg


def batch_place(msg: SampleMessage) -> Tuple[int, int]:
  r"""``(epoch, position)`` of a message marked by ``place_batch``.

  Raises:
    KeyError: the message is not marked.
  """
  epoch, position = msg[PLACE_KEY].tolist()
  return epoch, position


def tag_producer(msg: SampleMessage, producer: int) -> SampleMessage:
  r"""Marks a batch's message with the producer it was sampled for (the
  sampling processes of a server sample for every client's loader)."""
  msg[PRODUCER_KEY] = torch.tensor([producer], dtype=torch.int64)
  return msg


def producer_tag(msg: SampleMessage) -> Optional[int]:
  r"""The producer a message was sampled for (``tag_producer``), or None."""
  tag = msg.get(PRODUCER_KEY)
  return None if tag is None else int(tag)


def receipt_of(msg: SampleMessage) -> SampleMessage:
  r"""What says that a batch was sent straight to its loader's channel: its
  place and producer, without its data."""
  receipt = {key: msg[key] for key in (PLACE_KEY, PRODUCER_KEY) if key in msg}
  receipt[RECEIPT_KEY] = torch.ones(1, dtype=torch.int64)
  return receipt


def is_receipt(msg: SampleMessage) -> bool:
  r"""Whether ``msg`` is a ``receipt_of`` a batch, not the batch."""
  return RECEIPT_KEY in msg


def raise_if_error(msg: SampleMessage) -> None:
  r"""Raises the sampling error a message carries, if any.

  Raises:
    SamplingError: with the sampler's text (its traceback).
  """
  text = error_text(msg)
  if text is not None:
    raise SamplingError(f'a sampling process failed:\n{text}')


def decode(msg: SampleMessage) -> SampledBatch:
  r"""The batch of a message made by :func:`encode`.

  Raises:
    SamplingError: the message carries a sampling error.
  """
  raise_if_error(msg)
  nodes: Dict[NodeType, Dict[str, torch.Tensor]] = {}
  edges: Dict[EdgeType, Dict[str, torch.Tensor]] = {}
  metadata: Dict[str, torch.Tensor] = {}
  for key, value in msg.items():
    kind, _, rest = key.partition(_SEP)
    if kind == 'node':
      ntype, _, name = rest.rpartition(_SEP)
      nodes.setdefault(ntype, {})[name] = value
    elif kind == 'edge':
      etype, _, name = rest.rpartition(_SEP)
      edges.setdefault(tuple(etype.split(_ETYPE_SEP)), {})[name] = value
    elif kind == 'meta':
      metadata[rest] = value
  for fields in edges.values():
    index = fields.pop('index', None)
    if index is not None:  # with_edge_indices': rows and cols as its rows
      fields['rows'], fields['cols'] = index[0], index[1]
  return SampledBatch(
    hetero=bool(int(msg[HETERO_KEY])),
    nodes={t: NodeBatch(**fields) for t, fields in nodes.items()},
    edges={t: EdgeBatch(**fields) for t, fields in edges.items()},
    metadata=metadata,
    input_id=msg.get(INPUT_ID_KEY),
  )
