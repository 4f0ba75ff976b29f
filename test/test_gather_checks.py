"""A batch's gathers on the GPU checked together (``GatherChecks``: one
host sync a batch, not one a gather) and its labels gathered where its ids
are (``GpuLabels``). Without a GPU the same code runs over host tables."""

import pytest
import torch

from graphlearn_torch._ext import cuda_kernels_available
from graphlearn_torch.data import UnifiedTensor
from graphlearn_torch.data.gather_checks import GatherChecks
from graphlearn_torch.data.gpu_labels import GpuLabels

GPU = cuda_kernels_available()


def test_gathers_checked_together():
  """Gathers given one GatherChecks read no flag back: ``raise_first``
  reads them all at once and raises the first bad gather's own error; a
  batch of good gathers raises nothing, and the checks are forgotten once
  read."""
  table = torch.randn(40, 3)
  unified = UnifiedTensor(0 if GPU else None)
  unified.init_from([table[:10], table[10:]], [0, -1])
  device = unified.device
  checks = GatherChecks()
  good = torch.tensor([0, 39, 9, 10])
  assert torch.equal(unified.gather(good.to(device), checks=checks).cpu(), table[good])
  id2index = torch.randperm(40)
  rows = unified.gather(good.to(device), id2index, checks)
  assert torch.equal(rows.cpu(), table[id2index[good]])
  assert len(checks) == 2
  checks.raise_first()
  assert len(checks) == 0
  unified.gather(good.to(device), checks=checks)
  unified.gather(torch.tensor([3, 41, 2], device=device), checks=checks)
  unified.gather(torch.tensor([-5], device=device), checks=checks)
  with pytest.raises(ValueError, match='id 41 is out of range'):
    checks.raise_first()
  checks.raise_first()  # read once


@pytest.mark.parametrize('in_gpu_memory', [False, True])
def test_labels_gathered_where_the_ids_are(in_gpu_memory):
  """GpuLabels' tables (plain host tables without a GPU): each node's
  labels through the label map, 1-D and 2-D labels, placed once and again
  when the labels change, and an id without labels named once the batch's
  checks are read."""
  device = torch.device('cuda', 0) if GPU else torch.device('cpu')
  labels, id2idx = torch.randn(50, 3), torch.randperm(50)
  ids = torch.tensor([4, 0, 49, 4])
  tables = GpuLabels()
  got = tables.gather(labels, id2idx, ids.to(device), None, in_gpu_memory)
  assert got.device == device and torch.equal(got.cpu(), labels[id2idx[ids]])
  classes = torch.arange(50) * 3
  got = tables.gather(classes, None, ids.to(device), 'paper', in_gpu_memory)
  assert got.shape == (4,) and torch.equal(got.cpu(), classes[ids])
  changed = classes + 1
  assert torch.equal(
    tables.gather(changed, None, ids.to(device), 'paper', False).cpu(), ids * 3 + 1
  )
  checks = GatherChecks()
  tables.gather(labels, id2idx, torch.tensor([1, 50]).to(device), None, in_gpu_memory, checks)
  with pytest.raises(ValueError, match='id 50 is out of range'):
    checks.raise_first()
