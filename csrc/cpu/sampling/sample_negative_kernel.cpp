// Random negative sampling: (row, col) pairs that are not edges, checked by
// binary search in the (sorted) neighbor list of the row. Parallel over the
// requested pairs, each with its own random stream.
#include <torch/library.h>

#include <algorithm>

#include "checks.h"
#include "common.h"
#include "cpu/runtime/parallel.h"

namespace glt::cpu {
namespace {

// Raises a ValueError, naming the row, where a drawn row lies outside
// indices.
template <typename index_t>
void draw_negatives(const at::Tensor& indptr, const at::Tensor& indices, const int64_t* fixed_ids,
                    bool fixed_is_row, int64_t num_rows, int64_t num_cols, int64_t num_samples,
                    int64_t trials, int64_t rng_seed, int64_t* r_out, int64_t* c_out, uint8_t* ok) {
  const index_t* ptr = indptr.data_ptr<index_t>();
  const index_t* idx = indices.data_ptr<index_t>();
  FirstBad bad_row;
  glt::cpu::parallel_for(0, num_samples, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      Rng rng(static_cast<uint64_t>(rng_seed), static_cast<uint64_t>(i));
      int64_t r = 0, c = 0;
      for (int64_t t = 0; t < trials; ++t) {
        const bool row_fixed = fixed_ids && fixed_is_row;
        const bool col_fixed = fixed_ids && !fixed_is_row;
        r = row_fixed ? fixed_ids[i] : static_cast<int64_t>(rng.uniform(num_rows));
        c = col_fixed ? fixed_ids[i] : static_cast<int64_t>(rng.uniform(num_cols));
        if (!row_in_bounds(ptr[r], ptr[r + 1], indices.numel())) {
          bad_row.note(i);
          break;
        }
        if (!std::binary_search(idx + ptr[r], idx + ptr[r + 1], static_cast<index_t>(c))) {
          ok[i] = 1;
          break;
        }
      }
      r_out[i] = r;
      c_out[i] = c;
    }
  });
  if (bad_row.any()) raise_bad_row(ptr, r_out[bad_row.position()], indices.numel());
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> sample_negative_kernel(const at::Tensor& indptr,
                                                          const at::Tensor& indices,
                                                          const std::optional<at::Tensor>& fixed,
                                                          bool fixed_is_row, int64_t num_cols,
                                                          int64_t num_samples, int64_t trials,
                                                          bool padding, int64_t rng_seed) {
  const auto args =
      checked_negative_args(indptr, indices, fixed, fixed_is_row, num_cols, num_samples, trials);
  const int64_t num_rows = args.num_rows;
  num_samples = args.num_samples;
  const int64_t* fixed_ids = args.fixed.defined() ? args.fixed.data_ptr<int64_t>() : nullptr;
  const auto options = indptr.options().dtype(at::kLong);
  auto out_row = at::empty({num_samples}, options);
  auto out_col = at::empty({num_samples}, options);
  if (num_samples == 0) return {out_row, out_col};
  int64_t* r_out = out_row.data_ptr<int64_t>();
  int64_t* c_out = out_col.data_ptr<int64_t>();
  std::vector<uint8_t> ok(num_samples, 0);
  AT_DISPATCH_INDEX_TYPES(indptr.scalar_type(), "sample_negative", [&] {
    draw_negatives<index_t>(indptr, indices, fixed_ids, fixed_is_row, num_rows, num_cols,
                            num_samples, trials, rng_seed, r_out, c_out, ok.data());
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

TORCH_LIBRARY_IMPL(glt, CPU, m) { m.impl("sample_negative", TORCH_FN(sample_negative_kernel)); }

}  // namespace glt::cpu
