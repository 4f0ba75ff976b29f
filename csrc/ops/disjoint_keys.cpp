// glt::disjoint_keys(seed_keys, nbrs, nbr_nums, bits) -> neighbor keys
//
// Disjoint sampling keys a node by (seed, id): `(seed index << bits) | id`,
// so that the inducer keeps every seed's subgraph apart. The neighbors of
// one hop (nbrs, grouped seed by seed with nbr_nums[i] for seed i) take the
// key of the seed they were sampled for with their own id in the low `bits`
// bits. int64 throughout; every id must be below 2^bits.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def("disjoint_keys(Tensor seed_keys, Tensor nbrs, Tensor nbr_nums, int bits) -> Tensor");
}
