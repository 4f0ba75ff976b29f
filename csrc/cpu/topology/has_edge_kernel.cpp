// Edge lookups: whether (row, col) pairs are edges, by binary search in the
// (sorted) neighbor list of each row. Parallel over the pairs.
#include <torch/library.h>

#include <algorithm>

#include "checks.h"
#include "cpu/runtime/parallel.h"

namespace glt::cpu {

at::Tensor has_edge_kernel(const at::Tensor& indptr, const at::Tensor& indices,
                           const at::Tensor& rows, const at::Tensor& cols) {
  const auto [rows_c, cols_c] = checked_edge_query_args(indptr, indices, rows, cols);
  auto out = at::empty({rows.numel()}, rows.options().dtype(at::kBool));
  const int64_t* r = rows_c.data_ptr<int64_t>();
  const int64_t* c = cols_c.data_ptr<int64_t>();
  bool* found = out.data_ptr<bool>();
  AT_DISPATCH_INDEX_TYPES(indptr.scalar_type(), "has_edge", [&] {
    const index_t* ptr = indptr.data_ptr<index_t>();
    const index_t* idx = indices.data_ptr<index_t>();
    FirstBad bad_row;
    glt::cpu::parallel_for(0, rows.numel(), 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t first = ptr[r[i]], last = ptr[r[i] + 1];
        if (!row_in_bounds(first, last, indices.numel())) {
          bad_row.note(i);
          continue;
        }
        // Entries are below 2^31 when index_t is int32: a larger col is no edge.
        found[i] = c[i] == static_cast<index_t>(c[i]) &&
                   std::binary_search(idx + first, idx + last, static_cast<index_t>(c[i]));
      }
    });
    if (bad_row.any()) raise_bad_row(ptr, r[bad_row.position()], indices.numel());
  });
  return out;
}

TORCH_LIBRARY_IMPL(glt, CPU, m) { m.impl("has_edge", TORCH_FN(has_edge_kernel)); }

}  // namespace glt::cpu
