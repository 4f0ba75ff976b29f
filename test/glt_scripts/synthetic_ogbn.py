"""A stand-in for ``ogb.nodeproppred.PygNodePropPredDataset`` (no download
here): the planted-community graph, shaped as OGB gives a node dataset
(``y`` of shape ``[N, 1]``, ``get_idx_split()``). The GLT scripts beside it
import this in place of OGB's class; it is the only line they change
besides the CUDA ones."""

import os

from graphlearn_torch.datasets import community_graph


class PygNodePropPredDataset:
  r"""``dataset[0]`` and ``get_idx_split()`` as OGB's class has them.

  Args:
    name: the dataset name (any; the graph is synthetic).
    root: unused (nothing is downloaded).
  """

  def __init__(self, name: str, root: str = 'dataset'):
    self.name = name
    num_nodes = int(os.environ.get('GLT_SCRIPT_NUM_NODES', 3000))
    self._data = community_graph(num_nodes=num_nodes, num_classes=8, feature_dim=32, seed=0)
    self.num_classes = 8

  def __getitem__(self, idx: int):
    data = self._data.clone()
    data.y = data.y.view(-1, 1)
    return data

  def get_idx_split(self):
    data = self._data
    masks = {'train': data.train_mask, 'valid': data.val_mask, 'test': data.test_mask}
    return {k: m.nonzero().view(-1) for k, m in masks.items()}
