"""OGB node-property datasets read from their files on disk (no download).

Reads the raw CSV layout that OGB's archives unpack to
(``<root>/<name with _>/raw/*.csv.gz`` and ``split/<split>/*.csv.gz``) with
ogb's own raw reader, so no pickled ``processed/`` file is unpickled.
"""

import os
from pathlib import Path
from typing import Union

import numpy as np
import torch
from torch_geometric.data import Data


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


def load_ogb_node_dataset(root: Union[str, Path], name: str) -> Data:
  """Loads a homogeneous OGB node-property dataset (ogbn-arxiv, ogbn-products,
  ogbn-papers100M, ...) already on disk as a PyG ``Data`` with ``x``, ``y``,
  ``edge_index`` and the official ``train_idx``/``val_idx``/``test_idx``.

  Args:
    root: the folder holding ``<name with underscores>/`` (OGB's ``root``).
    name: the dataset name, e.g. 'ogbn-products'.
  """
  from ogb.io.read_graph_raw import read_csv_graph_raw

  meta = _ogb_meta(name)
  if meta['is hetero'] == 'True':
    raise ValueError(f'{name} is heterogeneous; load it with ogb and pass dicts by type')
  folder = Path(root) / '_'.join(name.split('-'))
  raw = folder / 'raw'
  if not (raw / 'edge.csv.gz').exists():
    raise FileNotFoundError(
      f'{name}: {raw}/edge.csv.gz not found; unpack the OGB archive under {root} (nothing is '
      f'downloaded here)'
    )
  extra = meta['additional node files']
  graph = read_csv_graph_raw(
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
