// glt::has_edge(indptr, indices, rows, cols) -> bool tensor
//
// Whether (rows[i], cols[i]) is an edge of the topology, for every i (binary
// search in the row's sorted entries). rows and cols are int64.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def("has_edge(Tensor indptr, Tensor indices, Tensor rows, Tensor cols) -> Tensor");
}
