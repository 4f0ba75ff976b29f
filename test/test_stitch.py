"""A distributed hop's pieces stitched into seed order: on a GPU by torch
ops with every size known on the host (no host sync), checked against the
stitch_neighbors op on random pieces, with the op's errors for bad pieces
from the host."""

import pytest
import torch

from graphlearn_torch.distributed.sampling.peer_requests import stitched_on_gpu
from graphlearn_torch.sampler.base import NeighborOutput


def random_pieces(num_seeds: int, num_parts: int, seed: int, with_edge: bool):
  g = torch.Generator().manual_seed(seed)
  owner = torch.randint(0, num_parts, (num_seeds,), generator=g)
  parts = []
  for p in range(num_parts):
    pos = torch.nonzero(owner == p).view(-1)
    if not pos.numel():
      continue
    num = torch.randint(0, 6, (pos.numel(),), generator=g)
    nbr = torch.randint(0, 10_000, (int(num.sum()),), generator=g)
    edge = torch.randint(0, 10_000, (nbr.numel(),), generator=g) if with_edge else None
    parts.append((pos, NeighborOutput(nbr, num, edge)))
  return parts


@pytest.mark.parametrize('num_parts', [1, 2, 5])
@pytest.mark.parametrize('with_edge', [False, True])
def test_the_gpu_stitch_equals_the_op(num_parts, with_edge):
  num_seeds = 3000
  parts = random_pieces(num_seeds, num_parts, seed=num_parts, with_edge=with_edge)
  want = torch.ops.glt.stitch_neighbors(
    num_seeds,
    [pos for pos, _ in parts],
    [out.nbr_num for _, out in parts],
    [out.nbr for _, out in parts],
    [out.edge for _, out in parts] if with_edge else [],
  )
  got = stitched_on_gpu(num_seeds, parts, with_edge, torch.device('cpu'))
  assert torch.equal(got.nbr, want[0]) and torch.equal(got.nbr_num, want[1])
  assert (got.edge is None) if not with_edge else torch.equal(got.edge, want[2])


def test_the_gpu_stitch_names_bad_pieces_from_the_host():
  cpu = torch.device('cpu')
  one = NeighborOutput(torch.tensor([7, 8]), torch.tensor([2]))
  with pytest.raises(ValueError, match='outside \\[0, 2\\)'):
    stitched_on_gpu(2, [(torch.tensor([2]), one)], False, cpu)
  with pytest.raises(ValueError, match='in two places'):
    stitched_on_gpu(2, [(torch.tensor([0]), one), (torch.tensor([0]), one)], False, cpu)
  short = NeighborOutput(torch.tensor([7]), torch.tensor([2]))
  with pytest.raises(ValueError, match="piece 1's counts sum to 2 but it has 1 neighbors"):
    stitched_on_gpu(2, [(torch.tensor([0]), one), (torch.tensor([1]), short)], False, cpu)
  negative = NeighborOutput(torch.tensor([], dtype=torch.int64), torch.tensor([-1]))
  with pytest.raises(ValueError, match='piece 0 has a negative count'):
    stitched_on_gpu(1, [(torch.tensor([0]), negative)], False, cpu)
