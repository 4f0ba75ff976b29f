// glt::sample_neighbors(indptr, indices, edge_ids?, edge_weights?, seeds,
//                       num_neighbors, replace, rng_seed)
//     -> (neighbors, count per seed, edge ids)
//
// One hop of neighbor sampling over a CSR (or CSC) topology: up to
// `num_neighbors` neighbors of every seed (-1: all of them), uniform without
// or with replacement, or with probability proportional to `edge_weights`
// (float32; edges of weight <= 0 are never drawn). indptr and indices are
// int32 or int64 (one dtype); seeds are int64 row ids. Outputs are int64:
// the neighbors seed by seed, how many each seed got, and the sampled edges'
// ids (`edge_ids[p]` of each sampled position p; empty without edge_ids).
// Every seed draws from its own stream under `rng_seed`, so a batch depends
// on the seed and the device only, not on the thread count.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def(
      "sample_neighbors(Tensor indptr, Tensor indices, Tensor? edge_ids, Tensor? edge_weights, "
      "Tensor seeds, int num_neighbors, bool replace, int rng_seed) -> (Tensor, Tensor, Tensor)");
}
