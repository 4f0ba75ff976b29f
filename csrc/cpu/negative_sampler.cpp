// Random negative sampling: (row, col) pairs that are not edges, checked by
// binary search in the (sorted) neighbor list of the row. Parallel over the
// requested pairs, each with its own random stream.
#include <ATen/Parallel.h>

#include <algorithm>

#include "../common.h"
#include "ops.h"

namespace glt {

std::tuple<at::Tensor, at::Tensor> sample_negative(const at::Tensor& indptr,
                                                   const at::Tensor& indices,
                                                   const std::optional<at::Tensor>& fixed,
                                                   bool fixed_is_row, int64_t num_cols,
                                                   int64_t num_samples,
                                                   int64_t trials, bool padding,
                                                   int64_t rng_seed) {
  const int64_t num_rows = check_csr(indptr, indices);
  TORCH_CHECK_VALUE(trials >= 1, "trials must be >= 1, got ", trials);
  TORCH_CHECK_VALUE(num_samples >= 0, "num_samples must be >= 0, got ", num_samples);
  const int64_t* fixed_ids = nullptr;
  at::Tensor fixed_t;
  if (fixed.has_value()) {
    check_index(*fixed, "fixed");
    fixed_t = fixed->contiguous();
    check_range(fixed_t, fixed_is_row ? num_rows : num_cols, "fixed");
    num_samples = fixed_t.numel();
    fixed_ids = fixed_t.data_ptr<int64_t>();
  }
  auto out_row = at::empty({num_samples}, indptr.options());
  auto out_col = at::empty({num_samples}, indptr.options());
  if (num_samples == 0) return {out_row, out_col};
  TORCH_CHECK_VALUE(num_cols > 0 && num_rows > 0,
                    "negative sampling needs a non-empty node set");
  const int64_t* ptr = indptr.data_ptr<int64_t>();
  const int64_t* idx = indices.data_ptr<int64_t>();
  int64_t* r_out = out_row.data_ptr<int64_t>();
  int64_t* c_out = out_col.data_ptr<int64_t>();
  std::vector<uint8_t> ok(num_samples, 0);

  at::parallel_for(0, num_samples, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      Rng rng(static_cast<uint64_t>(rng_seed), static_cast<uint64_t>(i));
      int64_t r = 0, c = 0;
      for (int64_t t = 0; t < trials; ++t) {
        const bool row_fixed = fixed_ids && fixed_is_row;
        const bool col_fixed = fixed_ids && !fixed_is_row;
        r = row_fixed ? fixed_ids[i] : static_cast<int64_t>(rng.uniform(num_rows));
        c = col_fixed ? fixed_ids[i] : static_cast<int64_t>(rng.uniform(num_cols));
        if (!std::binary_search(idx + ptr[r], idx + ptr[r + 1], c)) {
          ok[i] = 1;
          break;
        }
      }
      r_out[i] = r;
      c_out[i] = c;
    }
  });
  if (padding) return {out_row, out_col};
  int64_t kept = 0;
  for (int64_t i = 0; i < num_samples; ++i) {
    if (ok[i]) {
      r_out[kept] = r_out[i];
      c_out[kept] = c_out[i];
      ++kept;
    }
  }
  return {out_row.narrow(0, 0, kept), out_col.narrow(0, 0, kept)};
}

at::Tensor has_edge(const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& rows,
                    const at::Tensor& cols) {
  const int64_t num_rows = check_csr(indptr, indices);
  check_index(rows, "rows");
  check_index(cols, "cols");
  TORCH_CHECK_VALUE(rows.numel() == cols.numel(), "rows and cols differ in length: ",
                    rows.numel(), " vs ", cols.numel());
  const auto rows_c = rows.contiguous();
  const auto cols_c = cols.contiguous();
  check_range(rows_c, num_rows, "rows");
  auto out = at::empty({rows.numel()}, rows.options().dtype(at::kBool));
  const int64_t* ptr = indptr.data_ptr<int64_t>();
  const int64_t* idx = indices.data_ptr<int64_t>();
  const int64_t* r = rows_c.data_ptr<int64_t>();
  const int64_t* c = cols_c.data_ptr<int64_t>();
  bool* found = out.data_ptr<bool>();
  at::parallel_for(0, rows.numel(), 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      found[i] = std::binary_search(idx + ptr[r[i]], idx + ptr[r[i] + 1], c[i]);
    }
  });
  return out;
}

}  // namespace glt
