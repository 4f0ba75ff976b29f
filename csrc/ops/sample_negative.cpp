// glt::sample_negative(indptr, indices, fixed?, fixed_is_row, num_cols,
//                      num_samples, trials, padding, rng_seed) -> (rows, cols)
//
// Draws `num_samples` (row, col) pairs that are not edges of the topology,
// each redrawn up to `trials` times while it hits an edge (binary search in
// the row's sorted entries); with `fixed` (int64), one pair per fixed row
// (or col, when `fixed_is_row` is false) and `num_samples` is ignored.
// Without `padding`, pairs whose tries all hit edges are dropped; with it
// they are kept, so exactly `num_samples` pairs come back.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def(
      "sample_negative(Tensor indptr, Tensor indices, Tensor? fixed, bool fixed_is_row, "
      "int num_cols, int num_samples, int trials, bool padding, int rng_seed) -> (Tensor, Tensor)");
}
