// glt::scatter_rows_(out, positions, rows) -> out
//
// out[positions[i]] = rows[i] for every row i of `rows`, in place. `out` and
// `rows` are contiguous 2-D tensors of one dtype and row width; `positions`
// is a 1-D int64 tensor with one entry per row of `rows`, each in
// [0, out.size(0)) and distinct (a repeated position keeps one of its rows).
// The distributed feature lookup places the rows a peer sent with it.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def("scatter_rows_(Tensor(a!) out, Tensor positions, Tensor rows) -> Tensor(a!)");
}
