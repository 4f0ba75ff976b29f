// glt::sample_neighbors_partitioned(indptrs, indices, edge_ids, edge_weights,
//                                   parts, seeds, num_neighbors, replace,
//                                   rng_seeds)
//     -> (neighbors, count per seed, edge ids)
//
// One hop of neighbor sampling over the partitions of one host: seed i is a
// row of partition parts[i]'s topology (indptrs[p], indices[p], and
// edge_ids[p] / edge_weights[p] for every partition or for none; None for a
// partition without a topology here, which no seed may name). Each seed
// draws as sample_neighbors draws the seeds of its own partition, taken
// apart in seed order, with rng_seeds[p]; the outputs are sample_neighbors'
// in seed order: the draws of sampling each partition's seeds apart,
// stitched back. Topologies on the seeds' device (and `parts` too), of one
// dtype (int32 or int64).
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def(
      "sample_neighbors_partitioned(Tensor?[] indptrs, Tensor?[] indices, Tensor?[] edge_ids, "
      "Tensor?[] edge_weights, Tensor parts, Tensor seeds, int num_neighbors, bool replace, "
      "int[] rng_seeds) -> (Tensor, Tensor, Tensor)");
}
