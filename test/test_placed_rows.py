"""Feature rows from peers put in their places in a batch gathered on a
GPU: by torch ops with the positions and rows checked on the host, where
RPC brings them (no host sync), checked against the scatter_rows_ op on
random pieces, with the op's errors for bad pieces."""

import pytest
import torch

from graphlearn_torch.distributed.data.feature import placed_on_gpu


def random_pieces(num_rows: int, dim: int, num_parts: int, dtype: torch.dtype, seed: int):
  g = torch.Generator().manual_seed(seed)
  owner = torch.randint(0, num_parts + 1, (num_rows,), generator=g)  # part 0: gathered here
  pieces = []
  for p in range(1, num_parts + 1):
    pos = torch.nonzero(owner == p).view(-1)
    rows = (torch.rand(pos.numel(), dim, generator=g) * 100).to(dtype)
    pieces.append((pos, rows))
  return pieces


@pytest.mark.parametrize('num_parts', [1, 3])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.int64])
def test_placed_rows_equal_the_op(num_parts, dtype):
  out = torch.full((2000, 7), -1).to(dtype)
  pieces = random_pieces(2000, 7, num_parts, dtype, seed=num_parts)
  want = out.clone()
  for pos, rows in pieces:
    torch.ops.glt.scatter_rows_(want, pos, rows)
  got = placed_on_gpu(out, pieces)
  assert got is out
  assert torch.equal(got, want)


@pytest.mark.parametrize(
  'positions, rows',
  [
    (torch.tensor([0, 1, 10, 2]), torch.ones(4, 3)),  # a position past out's rows
    (torch.tensor([0, -1]), torch.ones(2, 3)),  # a negative one
    (torch.tensor([0, 1, 2]), torch.ones(4, 3)),  # fewer positions than rows
    (torch.tensor([0, 1]), torch.ones(2, 4)),  # rows of another width
    (torch.tensor([0, 1]), torch.ones(2, 3, dtype=torch.float64)),  # of another dtype
    (torch.tensor([0, 1]), torch.ones(6)),  # not 2-D
    (torch.tensor([[0, 1]]), torch.ones(2, 3)),  # positions not 1-D
    (torch.tensor([0, 1], dtype=torch.int32), torch.ones(2, 3)),  # nor int64
  ],
)
def test_bad_pieces_are_named_as_the_op_names_them(positions, rows):
  with pytest.raises(ValueError) as op_error:
    torch.ops.glt.scatter_rows_(torch.zeros(10, 3), positions, rows)
  out = torch.zeros(10, 3)
  with pytest.raises(ValueError) as error:
    placed_on_gpu(out, [(positions, rows)])
  assert str(error.value) == str(op_error.value)
  assert not out.any()  # nothing written
