"""Sampler outputs to PyG ``Data`` / ``HeteroData``, and the fields every
loader puts on its batches."""

from typing import Dict, Literal, Optional, Union

import torch
from torch_geometric.data import Data, HeteroData

from ..data.dataset import Dataset
from ..sampler.base import HeteroSamplerOutput, SamplerOutput, SamplingType
from ..typing import HOMO_EDGE_TYPE, HOMO_NODE_TYPE, EdgeType, NodeType, reverse_edge_type
from .batch import SampledBatch, to_pyg
from .collect import collect_features


def to_data(
  sampler_out: SamplerOutput,
  batch_labels: Optional[torch.Tensor] = None,
  node_feats: Optional[torch.Tensor] = None,
  edge_feats: Optional[torch.Tensor] = None,
  **kwargs,
) -> Data:
  """Builds a PyG ``Data`` from a homogeneous sampler output.

  Args:
    sampler_out: the sampled subgraph.
    batch_labels: labels of ``sampler_out.node``.
    node_feats: features of ``sampler_out.node``.
    edge_feats: features of ``sampler_out.edge``.
    **kwargs: more attributes (batch_size, input_id, ...).
  """
  batch = SampledBatch.from_output(sampler_out)
  batch.nodes[HOMO_NODE_TYPE].x = node_feats
  batch.nodes[HOMO_NODE_TYPE].y = batch_labels
  batch.edges[HOMO_EDGE_TYPE].attr = edge_feats
  return to_pyg(batch, **kwargs)


def to_hetero_data(
  hetero_sampler_out: HeteroSamplerOutput,
  batch_label_dict: Optional[Dict[NodeType, torch.Tensor]] = None,
  node_feat_dict: Optional[Dict[NodeType, torch.Tensor]] = None,
  edge_feat_dict: Optional[Dict[EdgeType, torch.Tensor]] = None,
  edge_dir: Literal['in', 'out'] = 'out',
  **kwargs,
) -> HeteroData:
  """Builds a PyG ``HeteroData`` from a heterogeneous sampler output.

  Args:
    hetero_sampler_out: the sampled subgraph.
    batch_label_dict: labels per node type.
    node_feat_dict: features per node type.
    edge_feat_dict: features per output edge type.
    edge_dir: the sampling direction: with 'out', a link sample's labels go
      on the reversed seed edge type (see ``attach_link_metadata``).
    **kwargs: attributes of the whole batch.
  """
  batch = SampledBatch.from_output(hetero_sampler_out, every_type=False)
  for ntype, node in batch.nodes.items():
    node.x = (node_feat_dict or {}).get(ntype)
    node.y = (batch_label_dict or {}).get(ntype)
  for etype, edge in batch.edges.items():
    edge.attr = (edge_feat_dict or {}).get(etype)
  res = to_pyg(batch, **kwargs)
  meta, input_type = hetero_sampler_out.metadata, hetero_sampler_out.input_type
  if isinstance(meta, dict) and LINK_LABEL_KEYS & meta.keys() and input_type is not None:
    place_link_labels(res, meta, input_type, edge_dir)
  return res


def collate(
  data: Dataset, out: Union[SamplerOutput, HeteroSamplerOutput], device: torch.device
) -> Union[Data, HeteroData]:
  """Gathers the features and labels of a sampled subgraph into PyG data.

  Args:
    data: the dataset the sample was drawn from.
    out: the sampler's output.
    device: where the batch goes.
  """
  res = to_pyg(gather_batch(data, out))
  return res.to(device) if device.type != 'cpu' else res


def gather_batch(data: Dataset, out: Union[SamplerOutput, HeteroSamplerOutput]) -> SampledBatch:
  """The batch of a sampler output with its features and labels from ``data``."""
  return collect_features(SampledBatch.from_output(out), data).wait()


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
    if 'edge_label' in meta:
      res[label_type].edge_label = meta['edge_label']
  else:
    res[src_t].src_index = meta['src_index']
    res[dst_t].dst_pos_index = meta['dst_pos_index']
    res[dst_t].dst_neg_index = meta['dst_neg_index']
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
  subgraph, the labels of a link batch.

  Args:
    res: the batch.
    sampling_type: node, link or subgraph sampling.
    metadata: the sampler's metadata of the batch.
    input_type: the seeds' node or edge type (None when homogeneous).
    input_id: the seeds' positions among the loader's seeds.
    edge_dir: the sampling direction.
  """
  if sampling_type == SamplingType.LINK:
    return attach_link_metadata(res, metadata, input_type, input_id, edge_dir)
  store = res if isinstance(res, Data) else res[input_type]
  store.batch_size = input_id.numel()
  store.input_id = input_id
  if 'mapping' in metadata:
    store.mapping = metadata['mapping']
  return res
