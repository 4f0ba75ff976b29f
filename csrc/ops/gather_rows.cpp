// glt::gather_rows(table, ids, id2index?, positions?, num_out_rows) -> rows
//
// Gathers rows `ids` (int64) of a 2-D contiguous table, through `id2index`
// (int64, one entry per id, -1 or out of range for ids without a row) when
// given. Without `positions`, row i of the output is the row of ids[i]; with
// it, the output has `num_out_rows` rows and the row of ids[i] lands at row
// positions[i] (the others are left for the caller to fill). An id without
// a row is an error naming it.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def(
      "gather_rows(Tensor table, Tensor ids, Tensor? id2index, Tensor? positions, "
      "int num_out_rows) -> Tensor");
}
