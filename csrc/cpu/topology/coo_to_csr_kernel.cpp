// COO -> CSR/CSC construction: two stable parallel counting sorts (by column,
// then by row), O(E + N) work, so each row's entries come out sorted.
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "checks.h"
#include "cpu/runtime/parallel.h"

namespace glt::cpu {
namespace {

// Stable counting sort of the positions 0..n-1 by keys[i] in [0, num_keys).
// Writes the sorted positions to `out` and, when `counts` is non-null, the
// number of positions per key.
void counting_sort(const int64_t* keys, int64_t n, int64_t num_keys, int64_t* out,
                   int64_t* counts) {
  // One histogram per chunk; bounded so histograms never outweigh the input.
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(num_keys, 1));
  const int64_t num_chunks =
      std::max<int64_t>(1, std::min<int64_t>(kernel_threads(), max_chunks));
  const int64_t chunk = (n + num_chunks - 1) / num_chunks;
  std::vector<int64_t> hist(num_chunks * num_keys, 0);

  glt::cpu::parallel_for(0, num_chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      int64_t* h = hist.data() + c * num_keys;
      const int64_t lo = c * chunk, hi = std::min(n, lo + chunk);
      for (int64_t i = lo; i < hi; ++i) ++h[keys[i]];
    }
  });
  int64_t running = 0;
  for (int64_t k = 0; k < num_keys; ++k) {
    const int64_t start = running;
    for (int64_t c = 0; c < num_chunks; ++c) {
      int64_t& h = hist[c * num_keys + k];
      const int64_t cnt = h;
      h = running;
      running += cnt;
    }
    if (counts != nullptr) counts[k] = running - start;
  }
  glt::cpu::parallel_for(0, num_chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      int64_t* h = hist.data() + c * num_keys;
      const int64_t lo = c * chunk, hi = std::min(n, lo + chunk);
      for (int64_t i = lo; i < hi; ++i) out[h[keys[i]]++] = i;
    }
  });
}

// out[i] = values[index[i]], in parallel.
void gather(const int64_t* values, const int64_t* index, int64_t n, int64_t* out) {
  glt::cpu::parallel_for(0, n, 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = values[index[i]];
  });
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> coo_to_csr_kernel(const at::Tensor& row,
                                                                 const at::Tensor& col,
                                                                 int64_t num_rows,
                                                                 int64_t num_cols) {
  const auto [rows, cols] = checked_coo_args(row, col, num_rows, num_cols);
  const int64_t n = rows.numel();
  auto opts = rows.options();
  auto indptr = at::zeros({num_rows + 1}, opts);
  auto perm = at::empty({n}, opts);
  auto indices = at::empty({n}, opts);
  if (n == 0) return {indptr, indices, perm};

  // Pass 1: order by column. Pass 2: stable order by row.
  auto by_col = at::empty({n}, opts);
  counting_sort(cols.data_ptr<int64_t>(), n, num_cols, by_col.data_ptr<int64_t>(), nullptr);
  auto row_by_col = at::empty({n}, opts);
  gather(rows.data_ptr<int64_t>(), by_col.data_ptr<int64_t>(), n, row_by_col.data_ptr<int64_t>());
  auto order = at::empty({n}, opts);
  int64_t* ptr = indptr.data_ptr<int64_t>();
  counting_sort(row_by_col.data_ptr<int64_t>(), n, num_rows, order.data_ptr<int64_t>(), ptr + 1);
  row_by_col = at::Tensor();
  for (int64_t r = 0; r < num_rows; ++r) ptr[r + 1] += ptr[r];

  gather(by_col.data_ptr<int64_t>(), order.data_ptr<int64_t>(), n, perm.data_ptr<int64_t>());
  gather(cols.data_ptr<int64_t>(), perm.data_ptr<int64_t>(), n, indices.data_ptr<int64_t>());
  return {indptr, indices, perm};
}

TORCH_LIBRARY_IMPL(glt, CPU, m) { m.impl("coo_to_csr", TORCH_FN(coo_to_csr_kernel)); }

}  // namespace glt::cpu
