"""The fields that say what a batch was sampled for: ``batch_size``,
``input_id``, ``mapping``, and a link batch's labels."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Literal, Optional, Union

import torch

from ..sampler.base import SamplingType
from ..typing import HOMO_EDGE_TYPE, EdgeType, NodeType, reverse_edge_type

if TYPE_CHECKING:  # PyG is imported on first use: sampling processes never need it
  from torch_geometric.data import Data, HeteroData


def attach_link_metadata(
  res: Union[Data, HeteroData],
  meta: Dict[str, torch.Tensor],
  input_type: Optional[EdgeType],
  input_id: torch.Tensor,
  edge_dir: Literal['out', 'in'] = 'out',
) -> Union[Data, HeteroData]:
  """Puts a link batch's labels and seed positions on its PyG data.

  Args:
    res: the batch.
    meta: the sampler's link metadata (``edge_label_index`` and
      ``edge_label``, or ``src_index``, ``dst_pos_index`` and
      ``dst_neg_index``).
    input_type: the seed edges' type (None when homogeneous).
    input_id: the seed edges' positions among the loader's seeds.
    edge_dir: the sampling direction; with 'out', a heterogeneous batch's
      ``edge_label_index``, ``edge_label`` and ``input_id`` go on the
      reversed edge type, its rows swapped (GLT's layout).
  """
  from torch_geometric.data import Data

  if isinstance(res, Data):
    for key, value in meta.items():
      res[key] = value
    res.input_id = input_id
    return res
  label_type = place_link_labels(res, meta, input_type or HOMO_EDGE_TYPE, edge_dir)
  res[label_type].input_id = input_id
  return res


# The keys of a link sample's metadata (binary or triplet labels).
LINK_LABEL_KEYS = {'edge_label_index', 'src_index'}


def place_link_labels(
  res: HeteroData, meta: Dict[str, torch.Tensor], etype: EdgeType, edge_dir: str
) -> EdgeType:
  """Puts a heterogeneous link sample's labels on ``res``; returns the edge
  type that holds them. As in GLT: with edge_dir 'out' the batch holds the
  reversed edge types, so the labelled edges go there too, reversed."""
  src_t, dst_t = etype[0], etype[-1]
  label_type = reverse_edge_type(etype) if edge_dir == 'out' else etype
  if 'edge_label_index' in meta:
    index = meta['edge_label_index']
    res[label_type].edge_label_index = index.flip(0) if edge_dir == 'out' else index
    for key in ('edge_label', 'edge_label_time'):
      if key in meta:
        res[label_type][key] = meta[key]
  else:
    res[src_t].src_index = meta['src_index']
    res[dst_t].dst_pos_index = meta['dst_pos_index']
    res[dst_t].dst_neg_index = meta['dst_neg_index']
    if 'seed_time' in meta:  # on both ends' types, as PyG's LinkLoader
      res[src_t].seed_time = meta['seed_time']
      res[dst_t].seed_time = meta['seed_time']
  return label_type


def label_batch(
  res: Union[Data, HeteroData],
  sampling_type: SamplingType,
  metadata: Dict[str, torch.Tensor],
  input_type: Optional[Union[NodeType, EdgeType]],
  input_id: torch.Tensor,
  edge_dir: Literal['out', 'in'] = 'out',
) -> Union[Data, HeteroData]:
  """Puts the fields that say what a batch was sampled for on its PyG data:
  ``batch_size`` and ``input_id`` (on the seeds' type), ``mapping`` for a
  subgraph, ``seed_time`` in temporal sampling, the labels (and their
  times) of a link batch.

  Args:
    res: the batch.
    sampling_type: node, link or subgraph sampling.
    metadata: the sampler's metadata of the batch.
    input_type: the seeds' node or edge type (None when homogeneous).
    input_id: the seeds' positions among the loader's seeds.
    edge_dir: the sampling direction.
  """
  from torch_geometric.data import Data

  if sampling_type == SamplingType.LINK:
    return attach_link_metadata(res, metadata, input_type, input_id, edge_dir)
  store = res if isinstance(res, Data) else res[input_type]
  store.batch_size = input_id.numel()
  store.input_id = input_id
  for key in ('mapping', 'seed_time'):
    if key in metadata:
      store[key] = metadata[key]
  return res
