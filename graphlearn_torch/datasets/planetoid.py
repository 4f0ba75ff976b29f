"""Planetoid citation graphs (Cora, CiteSeer, PubMed) from their raw files."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:  # PyG is imported on first use: sampling processes never need it
  from torch_geometric.data import Data


PLANETOID_FILES = ('x', 'tx', 'allx', 'y', 'ty', 'ally', 'graph', 'test.index')


def load_planetoid(root: Union[str, Path], name: str) -> Data:
  """Reads ``ind.<name>.*`` from ``root`` (or ``root/<Name>/raw``) as PyG's
  Planetoid does, with no download: the public split's masks included.

  Args:
    root: a folder with the eight raw files.
    name: 'cora', 'citeseer' or 'pubmed'.
  """
  from torch_geometric.io import read_planetoid_data

  name = name.lower()
  root = Path(root)
  for folder in (root, root / name.capitalize() / 'raw', root / name / 'raw'):
    if all((folder / f'ind.{name}.{f}').exists() for f in PLANETOID_FILES):
      return read_planetoid_data(str(folder), name)
  raise FileNotFoundError(
    f'Planetoid {name!r}: no ind.{name}.{{{",".join(PLANETOID_FILES)}}} files under {root}'
  )
