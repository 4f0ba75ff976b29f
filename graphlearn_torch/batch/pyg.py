"""The PyG form of a sampled batch: ``Data`` / ``HeteroData``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Literal, Optional, Union

import torch

from ..data.dataset import Dataset
from ..sampler.base import HeteroSamplerOutput, SamplerOutput
from ..typing import HOMO_EDGE_TYPE, HOMO_NODE_TYPE, EdgeType, NodeType
from .features import gather_batch
from .labels import LINK_LABEL_KEYS, place_link_labels
from .sampled import HopCounts, SampledBatch

if TYPE_CHECKING:  # PyG is imported on first use: sampling processes never need it
  from torch_geometric.data import Data, HeteroData


def import_pyg() -> None:
  r"""Imports the PyG classes batches become (a second or two, once per
  process): a loader does it while its samplers start rather than at its
  first batch."""
  import torch_geometric.data  # noqa: F401


def _as_list(counts: Optional[HopCounts]) -> Optional[List[int]]:
  if counts is None:
    return None
  return counts.tolist() if isinstance(counts, torch.Tensor) else list(counts)


def _padded(counts: Dict, length: int) -> Dict[Union[NodeType, EdgeType], List[int]]:
  """Per-type hop counts as lists of at least ``length`` entries (zeros after
  the last hop a type appeared in), as PyG's per-layer trimming reads them."""
  padded = {}
  for key, value in counts.items():
    value = _as_list(value)
    padded[key] = value + [0] * (length - len(value))
  return padded


def to_pyg(batch: SampledBatch, **kwargs) -> Union[Data, HeteroData]:
  """The PyG ``Data`` (or ``HeteroData``) of a sampled batch.

  Homogeneous batches carry ``x``, ``y``, ``edge_index``, ``n_id`` (and
  GLT's ``node``), ``e_id`` (and ``edge``), ``edge_attr``, ``batch`` (the
  seeds; in disjoint sampling each node's seed, PyG's batch vector),
  ``num_sampled_nodes`` and ``num_sampled_edges``; heterogeneous
  ones the same per type, plus GLT's batch-level hop-count dicts.

  Args:
    batch: the batch.
    **kwargs: more attributes of the whole batch.
  """
  from torch_geometric.data import Data, HeteroData

  if not batch.hetero:
    node, edge = batch.nodes[HOMO_NODE_TYPE], batch.edges[HOMO_EDGE_TYPE]
    data = Data(
      x=node.x,
      edge_index=edge.edge_index(),
      y=node.y,
      n_id=node.ids,
      num_sampled_nodes=_as_list(node.num_sampled),
      num_sampled_edges=_as_list(edge.num_sampled),
      **kwargs,
    )
    data.num_nodes = node.ids.numel()
    data.node = data.n_id  # GLT's name, the same tensor
    if edge.attr is not None:
      data.edge_attr = edge.attr
    if edge.eids is not None:
      data.e_id = edge.eids
      data.edge = data.e_id
    if node.seed_index is not None:
      data.batch = node.seed_index  # disjoint: PyG's batch vector
    elif node.batch is not None:
      data.batch = node.batch
    return data

  data = HeteroData(**kwargs)
  edge_counts = _padded(
    {e: b.num_sampled for e, b in batch.edges.items() if b.num_sampled is not None}, 0
  )
  num_hops = max((len(c) for c in edge_counts.values()), default=0)
  node_counts = _padded(
    {t: b.num_sampled for t, b in batch.nodes.items() if b.num_sampled is not None}, num_hops + 1
  )
  edge_counts = _padded(edge_counts, num_hops)
  for ntype, node in batch.nodes.items():
    store = data[ntype]
    store.n_id = node.ids
    store.node = node.ids  # GLT's name, the same tensor
    store.num_nodes = node.ids.numel()
    if ntype in node_counts:
      store.num_sampled_nodes = node_counts[ntype]
    if node.x is not None:
      store.x = node.x
    if node.y is not None:
      store.y = node.y
  for ntype, node in batch.nodes.items():
    if node.batch is not None:
      data[ntype].batch = node.batch
      data[ntype].batch_size = node.batch.numel()
    if node.seed_index is not None:
      data[ntype].batch = node.seed_index  # disjoint: PyG's batch vector
  for etype, edge in batch.edges.items():
    store = data[etype]
    store.edge_index = edge.edge_index()
    if edge.eids is not None:
      store.e_id = edge.eids
      store.edge = store.e_id
    if etype in edge_counts:
      store.num_sampled_edges = edge_counts[etype]
    if edge.attr is not None:
      store.edge_attr = edge.attr
  # GLT's batch-level dicts beside PyG's per-type attributes.
  data.num_sampled_nodes = {t: torch.tensor(c) for t, c in node_counts.items()}
  data.num_sampled_edges = {e: torch.tensor(c) for e, c in edge_counts.items()}
  return data


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
