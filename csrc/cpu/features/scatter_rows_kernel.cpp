// Row scatter: out[positions[i]] = rows[i], parallel over rows, one memcpy
// each (index_copy_ walks the elements one by one, several times slower).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstring>

#include "cpu/runtime/parallel.h"
#include "partition_checks.h"

namespace glt::cpu {
namespace {

at::Tensor& scatter_rows_kernel(at::Tensor& out, const at::Tensor& positions,
                                const at::Tensor& rows) {
  const auto [pos_c, src_rows] = checked_scatter_args(out, positions, rows);
  const int64_t n = pos_c.numel();
  const int64_t num_out = out.size(0);
  const int64_t row_bytes = out.size(1) * out.element_size();
  if (n == 0 || row_bytes == 0) return out;
  const int64_t* pos = pos_c.data_ptr<int64_t>();
  const char* src = static_cast<const char*>(src_rows.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  for (int64_t i = 0; i < n; ++i) {  // checked before out is touched
    TORCH_CHECK_VALUE(pos[i] >= 0 && pos[i] < num_out, "scatter_rows_: positions[", i, "] is ",
                      pos[i], ", out of range [0, ", num_out, ")");
  }
  glt::cpu::parallel_for(0, n, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      std::memcpy(dst + pos[i] * row_bytes, src + i * row_bytes, row_bytes);
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(glt, CPU, m) { m.impl("scatter_rows_", TORCH_FN(scatter_rows_kernel)); }

}  // namespace glt::cpu
