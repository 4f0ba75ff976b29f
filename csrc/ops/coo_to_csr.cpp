// glt::coo_to_csr(row, col, num_rows, num_cols) -> (indptr, indices, perm)
//
// Builds a compressed sparse layout from COO: rows are `row`, entries `col`
// (int64, ids in [0, num_rows) and [0, num_cols)). indptr has num_rows + 1
// entries; perm[i] is the input position of the i-th stored edge; each
// row's entries are sorted by column, ties in input order. indices are
// int64, or `indices_dtype` (int32 or int64; int32 only where every edge
// position and column fits). CSC is the same op with the roles swapped.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def(
      "coo_to_csr(Tensor row, Tensor col, int num_rows, int num_cols, "
      "ScalarType? indices_dtype=None) -> (Tensor, Tensor, Tensor)");
}
