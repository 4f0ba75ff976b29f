// glt::stitch_neighbors(num_seeds, positions, nbr_nums, nbrs, edges) -> (nbr, nbr_num, edge)
//
// One hop's neighbors in seed order from per-partition pieces: piece j holds
// the seeds at `positions[j]` of the hop (1-D int64, in [0, num_seeds)), their
// neighbor counts `nbr_nums[j]` and their neighbors `nbrs[j]` (and edge ids
// `edges[j]`; `edges` is empty when the hop has none), each seed's run after
// the previous one's. The output gives every seed its run, in seed order;
// seeds no piece names have none.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def(
      "stitch_neighbors(int num_seeds, Tensor[] positions, Tensor[] nbr_nums, Tensor[] nbrs, "
      "Tensor[] edges) -> (Tensor, Tensor, Tensor?)");
}
