"""Sampler outputs to PyG ``Data`` / ``HeteroData``."""

from typing import Dict, Optional, Union

import torch
from torch_geometric.data import Data, HeteroData

from ..data.dataset import Dataset
from ..sampler.base import HeteroSamplerOutput, SamplerOutput
from ..typing import EdgeType, NodeType, reverse_edge_type


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
  data = Data(
    x=node_feats,
    edge_index=torch.stack([sampler_out.row, sampler_out.col]),
    y=batch_labels,
    n_id=sampler_out.node,
    num_sampled_nodes=sampler_out.num_sampled_nodes,
    num_sampled_edges=sampler_out.num_sampled_edges,
    **kwargs,
  )
  data.num_nodes = sampler_out.node.numel()
  data.node = data.n_id  # GLT's name, the same tensor
  if edge_feats is not None:
    data.edge_attr = edge_feats
  if sampler_out.edge is not None:
    data.e_id = sampler_out.edge
    data.edge = data.e_id
  if sampler_out.batch is not None:
    data.batch = sampler_out.batch
  return data


def to_hetero_data(
  sampler_out: HeteroSamplerOutput,
  batch_label_dict: Optional[Dict[NodeType, torch.Tensor]] = None,
  node_feat_dict: Optional[Dict[NodeType, torch.Tensor]] = None,
  edge_feat_dict: Optional[Dict[EdgeType, torch.Tensor]] = None,
  **kwargs,
) -> HeteroData:
  """Builds a PyG ``HeteroData`` from a heterogeneous sampler output.

  Args:
    sampler_out: the sampled subgraph.
    batch_label_dict: labels per node type.
    node_feat_dict: features per node type.
    edge_feat_dict: features per output edge type.
    **kwargs: attributes of the whole batch.
  """
  data = HeteroData(**kwargs)
  num_sampled_edges = _padded_counts(sampler_out.num_sampled_edges, 0)
  num_hops = max((len(c) for c in num_sampled_edges.values()), default=0)
  num_sampled_nodes = _padded_counts(sampler_out.num_sampled_nodes, num_hops + 1)
  num_sampled_edges = _padded_counts(num_sampled_edges, num_hops)
  for ntype, node in sampler_out.node.items():
    store = data[ntype]
    store.n_id = node
    store.node = node  # GLT's name, the same tensor
    store.num_nodes = node.numel()
    if ntype in num_sampled_nodes:
      store.num_sampled_nodes = num_sampled_nodes[ntype]
    if node_feat_dict and node_feat_dict.get(ntype) is not None:
      store.x = node_feat_dict[ntype]
    if batch_label_dict and batch_label_dict.get(ntype) is not None:
      store.y = batch_label_dict[ntype]
  for ntype, seeds in (sampler_out.batch or {}).items():
    data[ntype].batch = seeds
    data[ntype].batch_size = seeds.numel()
  for etype in sampler_out.row:
    store = data[etype]
    store.edge_index = torch.stack([sampler_out.row[etype], sampler_out.col[etype]])
    if sampler_out.edge is not None:
      store.e_id = sampler_out.edge[etype]
      store.edge = store.e_id
    if etype in num_sampled_edges:
      store.num_sampled_edges = num_sampled_edges[etype]
    if edge_feat_dict and edge_feat_dict.get(etype) is not None:
      store.edge_attr = edge_feat_dict[etype]
  # GLT's batch-level dicts beside PyG's per-type attributes.
  data.num_sampled_nodes = {t: torch.tensor(c) for t, c in num_sampled_nodes.items()}
  data.num_sampled_edges = {e: torch.tensor(c) for e, c in num_sampled_edges.items()}
  return data


def _padded_counts(counts: Optional[Dict], length: int) -> Dict:
  """Per-type hop counts as lists of at least ``length`` entries (zeros
  after the last hop a type appeared in), as PyG's per-layer trimming reads
  them."""
  padded = {}
  for key, value in (counts or {}).items():
    value = value.tolist() if isinstance(value, torch.Tensor) else list(value)
    padded[key] = value + [0] * (length - len(value))
  return padded


def collate(
  data: Dataset, out: Union[SamplerOutput, HeteroSamplerOutput], device: torch.device
) -> Union[Data, HeteroData]:
  """Gathers the features and labels of a sampled subgraph into PyG data.

  Args:
    data: the dataset the sample was drawn from.
    out: the sampler's output.
    device: where the batch goes.
  """
  if isinstance(out, SamplerOutput):
    feat, efeat = data.get_node_feature(), data.get_edge_feature()
    res = to_data(
      out,
      batch_labels=data.gather_node_labels(out.node),
      node_feats=feat[out.node] if feat is not None else None,
      edge_feats=efeat[out.edge] if efeat is not None and out.edge is not None else None,
    )
  else:
    out = out.with_every_type()
    node_feats, labels, edge_feats = {}, {}, {}
    for ntype, nodes in out.node.items():
      feat = data.get_node_feature(ntype)
      if feat is not None:
        node_feats[ntype] = feat[nodes]
      label = data.gather_node_labels(nodes, ntype)
      if label is not None:
        labels[ntype] = label
    for etype, eids in (out.edge or {}).items():
      orig = reverse_edge_type(etype) if data.edge_dir == 'out' else etype
      efeat = data.get_edge_feature(orig)
      if efeat is not None:
        edge_feats[etype] = efeat[eids]
    res = to_hetero_data(out, labels, node_feats, edge_feats)
  return res.to(device) if device.type != 'cpu' else res
