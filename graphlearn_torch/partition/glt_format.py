"""Reading GLT 0.2.x partitions (pickled META, ``torch.save``'d tensors and
pickled feature chunks). Unpickling can run code: ``load_partition`` calls
this only with ``allow_pickle=True``."""

import os
import pickle
from typing import Optional

import torch

from ..typing import as_str
from ..utils.common import load_and_concatenate_tensors
from .format import FeaturePartitionData, GraphPartitionData
from .partition_book import GLTPartitionBook


def _torch_load(path: str, required: bool = True) -> Optional[torch.Tensor]:
  if not os.path.exists(path):
    if required:
      raise FileNotFoundError(f'{path} is missing from the GLT partition')
    return None
  return torch.load(path, weights_only=False)


def _sub(base: str, type_) -> str:
  return os.path.join(base, as_str(type_)) if type_ is not None else base


def _graph(graph_dir: str) -> GraphPartitionData:
  rows, cols, eids = (
    _torch_load(os.path.join(graph_dir, f'{n}.pt')) for n in ('rows', 'cols', 'eids')
  )
  weights = _torch_load(os.path.join(graph_dir, 'weights.pt'), required=False)
  if rows.numel() != cols.numel():  # rewritten as CSC or CSR: (indices, indptr) or the reverse
    return GraphPartitionData((rows, cols), eids, weights)
  return GraphPartitionData(torch.stack([rows, cols]), eids, weights)


def _features(feat_dir: str) -> Optional[FeaturePartitionData]:
  if not os.path.exists(os.path.join(feat_dir, 'feats.pkl')):
    return None
  return FeaturePartitionData(
    load_and_concatenate_tensors(os.path.join(feat_dir, 'feats.pkl')),
    load_and_concatenate_tensors(os.path.join(feat_dir, 'ids.pkl')),
    _torch_load(os.path.join(feat_dir, 'cache_feats.pt'), required=False),
    _torch_load(os.path.join(feat_dir, 'cache_ids.pt'), required=False),
  )


def load_glt_partition(root_dir: str, partition_idx: int, graph_caching: bool = False):
  """Loads a GLT 0.2.x partition; same return value as ``load_partition``."""
  with open(os.path.join(root_dir, 'META'), 'rb') as f:
    meta = pickle.load(f)
  num_parts = int(meta['num_parts'])
  if not 0 <= int(partition_idx) < num_parts:
    raise ValueError(
      f'partition_idx {partition_idx} is out of range: {root_dir} has {num_parts} partitions'
    )
  part = os.path.join(root_dir, f'part{partition_idx}')
  graph_base = os.path.join(root_dir, 'graph') if graph_caching else os.path.join(part, 'graph')

  def book(kind, type_):
    path = _sub(os.path.join(root_dir, kind), type_) + '.pt'
    tensor = _torch_load(path, required=kind == 'node_pb')
    return None if tensor is None else GLTPartitionBook(tensor, num_parts)

  if meta['data_cls'] != 'hetero':
    return (
      num_parts,
      int(partition_idx),
      _graph(graph_base),
      _features(os.path.join(part, 'node_feat')),
      _features(os.path.join(part, 'edge_feat')),
      book('node_pb', None),
      book('edge_pb', None),
    )
  ntypes, etypes = meta['node_types'], [tuple(e) for e in meta['edge_types']]
  node_feat = {t: _features(_sub(os.path.join(part, 'node_feat'), t)) for t in ntypes}
  edge_feat = {e: _features(_sub(os.path.join(part, 'edge_feat'), e)) for e in etypes}
  return (
    num_parts,
    int(partition_idx),
    {e: _graph(_sub(graph_base, e)) for e in etypes},
    {t: f for t, f in node_feat.items() if f is not None} or None,
    {e: f for e, f in edge_feat.items() if f is not None} or None,
    {t: book('node_pb', t) for t in ntypes},
    {e: book('edge_pb', e) for e in etypes},
  )
