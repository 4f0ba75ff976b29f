"""The kernels as dispatcher ops (torch.ops.glt): registered with their
schemas and a CPU kernel each, int32 topologies giving what int64 ones give,
and bad input raising a ValueError that names it."""

import pytest
import torch
from conftest import random_edges

import graphlearn_torch  # noqa: F401  (registers torch.ops.glt)

OPS = ('coo_to_csr', 'sample_neighbors', 'sample_negative', 'has_edge', 'induced_subgraph',
       'gather_rows')  # fmt: skip


@pytest.mark.parametrize('op', OPS)
def test_every_op_has_a_schema_and_a_cpu_kernel(op):
  assert torch._C._dispatch_has_kernel_for_dispatch_key(f'glt::{op}', 'CPU')
  schema = getattr(torch.ops.glt, op).default._schema
  assert schema.name == f'glt::{op}'


def topology(dtype):
  ei = random_edges(100, 100, 2000, seed=1)
  indptr, indices, perm = torch.ops.glt.coo_to_csr(ei[0], ei[1], 100, 100)
  weights = torch.rand(2000, generator=torch.Generator().manual_seed(0))
  return indptr.to(dtype), indices.to(dtype), (perm * 3 + 1).contiguous(), weights


def test_int32_topologies_give_what_int64_ones_give():
  wide, narrow = topology(torch.int64), topology(torch.int32)
  seeds = torch.randint(0, 100, (300,))
  for weighted, replace, k in (
    (False, False, 5),
    (False, True, 5),
    (True, False, 3),
    (False, False, -1),
  ):
    a, b = (
      torch.ops.glt.sample_neighbors(*t[:3], t[3] if weighted else None, seeds, k, replace, 42)
      for t in (wide, narrow)
    )
    for x, y in zip(a, b):
      assert torch.equal(x, y) and y.dtype == torch.int64
  rows, cols = torch.randint(0, 100, (2, 1000))
  assert torch.equal(
    torch.ops.glt.has_edge(wide[0], wide[1], rows, cols),
    torch.ops.glt.has_edge(narrow[0], narrow[1], rows, cols),
  )
  nodes = torch.randperm(100)[:40]
  for x, y in zip(
    torch.ops.glt.induced_subgraph(wide[0], wide[1], wide[2], nodes),
    torch.ops.glt.induced_subgraph(narrow[0], narrow[1], narrow[2], nodes),
  ):
    assert torch.equal(x, y)
  for x, y in zip(
    torch.ops.glt.sample_negative(wide[0], wide[1], None, True, 100, 500, 5, True, 7),
    torch.ops.glt.sample_negative(narrow[0], narrow[1], None, True, 100, 500, 5, True, 7),
  ):
    assert torch.equal(x, y)


def test_bad_input_is_a_value_error_naming_it():
  indptr, indices, eids, _ = topology(torch.int64)
  with pytest.raises(ValueError, match='seeds holds ids outside'):
    torch.ops.glt.sample_neighbors(indptr, indices, None, None, torch.tensor([100]), 2, False, 0)
  with pytest.raises(ValueError, match='indices must have indptr'):
    torch.ops.glt.has_edge(indptr, indices.int(), torch.tensor([0]), torch.tensor([0]))
  with pytest.raises(ValueError, match='indptr must be int64 or int32'):
    torch.ops.glt.has_edge(indptr.float(), indices, torch.tensor([0]), torch.tensor([0]))
  with pytest.raises(ValueError, match='nodes must be unique'):
    torch.ops.glt.induced_subgraph(indptr, indices, None, torch.tensor([1, 1]))
  with pytest.raises(ValueError, match='id 7 is out of range'):
    torch.ops.glt.gather_rows(torch.randn(5, 2), torch.tensor([7]), None, None, -1)
  with pytest.raises(ValueError, match='row holds ids outside'):
    torch.ops.glt.coo_to_csr(torch.tensor([5]), torch.tensor([0]), 3, 3)
