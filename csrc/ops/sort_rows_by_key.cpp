// glt::sort_rows_by_key(indptr, keys) -> (order, first_unsorted_row)
//
// The order that sorts each row's entries by `keys` (one per stored entry,
// int64 or float64), ties in stored order: order[j] is the stored position
// of the j-th entry after the sort (rows stay where they are). When every
// row is sorted already, order is empty and first_unsorted_row is -1; else
// first_unsorted_row is the first row that was not. indptr is int32 or
// int64.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def("sort_rows_by_key(Tensor indptr, Tensor keys) -> (Tensor, int)");
}
