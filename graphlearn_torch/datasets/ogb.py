"""OGB node-property datasets read from their files on disk (no download).

Reads the raw CSV layout that OGB's archives unpack to with ogb's own raw
readers (those its ``NodePropPredDataset`` processes with), so no pickled
``processed/`` file is unpickled and nothing is written beside the data:

- homogeneous (ogbn-arxiv, ogbn-products, ...):
  ``<root>/<name with _>/raw/{edge,node-feat,node-label}.csv.gz`` and
  ``split/<split>/{train,valid,test}.csv.gz``;
- heterogeneous (ogbn-mag): ``raw/num-node-dict.csv.gz``,
  ``raw/triplet-type-list.csv.gz``, ``raw/relations/<src>___<rel>___<dst>/
  edge.csv.gz``, ``raw/node-feat/<type>/node-feat.csv.gz``,
  ``raw/node-label/<type>/node-label.csv.gz`` and
  ``split/<split>/<type>/{train,valid,test}.csv.gz``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Union

import numpy as np
import torch

if TYPE_CHECKING:  # PyG is imported on first use: sampling processes never need it
  from torch_geometric.data import Data, HeteroData


logger = logging.getLogger(__name__)


def _ogb_meta(name: str):
  try:
    import ogb.nodeproppred
    import pandas as pd
  except ImportError as e:
    raise ImportError("reading OGB datasets needs ogb: pip install ogb (or '.[ogb]')") from e
  master = pd.read_csv(
    os.path.join(os.path.dirname(ogb.nodeproppred.__file__), 'master.csv'),
    index_col=0,
    keep_default_na=False,
  )
  if name not in master:
    raise ValueError(f'unknown OGB node-property dataset {name!r}; known: {list(master)}')
  return master[name]


def _read_csv(path: Path) -> np.ndarray:
  import pandas as pd

  return pd.read_csv(path, compression='gzip', header=None).to_numpy(copy=True)


def _read_ids(path: Path) -> torch.Tensor:
  return torch.from_numpy(_read_csv(path)[:, 0].astype(np.int64))


def _files(meta, key: str):
  extra = meta[key]
  return [] if extra == 'None' else extra.split(',')


def _require(path: Path, name: str, root) -> None:
  if not path.exists():
    raise FileNotFoundError(
      f'{name}: {path} not found; unpack the OGB archive under {root} (nothing is downloaded here)'
    )


def _quietly(read, *args, **kwargs):
  r"""Calls one of ogb's readers, which print their progress and draw
  progress bars, logging that output (at debug level) instead."""
  out = io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
    result = read(*args, **kwargs)
  for line in out.getvalue().replace('\r', '\n').splitlines():
    if line.strip():
      logger.debug('ogb: %s', line)
  return result


def load_ogb_node_dataset(root: Union[str, Path], name: str) -> Union[Data, HeteroData]:
  """Loads an OGB node-property dataset already on disk: a homogeneous one
  (ogbn-arxiv, ogbn-products, ogbn-papers100M, ...) as a PyG ``Data`` with
  ``x``, ``y``, ``edge_index`` and the official ``train_idx``/``val_idx``/
  ``test_idx``; a heterogeneous one (ogbn-mag) as a ``HeteroData`` with
  those per node type (``x`` where the type has features, ``y`` and the
  splits where it has labels; ogbn-mag's papers also get ``year``).

  Args:
    root: the folder holding ``<name with underscores>/`` (OGB's ``root``).
    name: the dataset name, e.g. 'ogbn-products' or 'ogbn-mag'.
  """
  from torch_geometric.data import Data

  meta = _ogb_meta(name)
  if meta['is hetero'] == 'True':
    return _load_hetero(root, name, meta)
  from ogb.io.read_graph_raw import read_csv_graph_raw

  folder = Path(root) / '_'.join(name.split('-'))
  raw = folder / 'raw'
  _require(raw / 'edge.csv.gz', name, root)
  extra = meta['additional node files']
  graph = _quietly(
    read_csv_graph_raw,
    str(raw),
    add_inverse_edge=meta['add_inverse_edge'] == 'True',
    additional_node_files=[] if extra == 'None' else extra.split(','),
  )[0]
  labels = _read_csv(raw / 'node-label.csv.gz')
  y = torch.from_numpy(labels.astype(np.float32 if np.isnan(labels).any() else np.int64))
  split = folder / 'split' / meta['split']
  data = Data(
    x=None if graph['node_feat'] is None else torch.from_numpy(graph['node_feat']).float(),
    edge_index=torch.from_numpy(graph['edge_index']).long(),
    y=y.view(-1) if y.dim() == 2 and y.size(1) == 1 else y,
    num_nodes=int(graph['num_nodes']),
  )
  data.train_idx = _read_ids(split / 'train.csv.gz')
  data.val_idx = _read_ids(split / 'valid.csv.gz')
  data.test_idx = _read_ids(split / 'test.csv.gz')
  return data


def _load_hetero(root: Union[str, Path], name: str, meta) -> HeteroData:
  from ogb.io.read_graph_raw import (
    read_csv_heterograph_raw,
    read_node_label_hetero,
    read_nodesplitidx_split_hetero,
  )
  from torch_geometric.data import HeteroData

  folder = Path(root) / '_'.join(name.split('-'))
  raw = folder / 'raw'
  for needed in ('num-node-dict.csv.gz', 'triplet-type-list.csv.gz'):
    _require(raw / needed, name, root)
  node_files = _files(meta, 'additional node files')
  graph = _quietly(
    read_csv_heterograph_raw,
    str(raw),
    add_inverse_edge=meta['add_inverse_edge'] == 'True',
    additional_node_files=node_files,
    additional_edge_files=_files(meta, 'additional edge files'),
  )[0]
  labels = read_node_label_hetero(str(raw))
  split_dir = folder / 'split' / meta['split']
  _require(split_dir / 'nodetype-has-split.csv.gz', name, root)
  splits = read_nodesplitidx_split_hetero(str(split_dir))

  data = HeteroData()
  for ntype, n in graph['num_nodes_dict'].items():
    data[ntype].num_nodes = int(n)
  for ntype, feat in graph['node_feat_dict'].items():
    data[ntype].x = torch.from_numpy(feat).float()
  for extra in node_files:  # ogbn-mag: node_year -> year
    for ntype, values in graph[extra].items():
      data[ntype][extra.removeprefix('node_')] = torch.from_numpy(values).view(-1)
  for etype, edge_index in graph['edge_index_dict'].items():
    data[tuple(etype)].edge_index = torch.from_numpy(edge_index).long()
  for ntype, y in labels.items():
    y = torch.from_numpy(y.astype(np.float32 if np.isnan(y).any() else np.int64))
    data[ntype].y = y.view(-1) if y.dim() == 2 and y.size(1) == 1 else y
  for ntype in splits[0]:
    for key, ids in zip(('train_idx', 'val_idx', 'test_idx'), splits):
      data[ntype][key] = torch.from_numpy(ids[ntype].astype(np.int64))
  return data
