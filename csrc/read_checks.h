// Checks a kernel makes as it reads, where checking its inputs whole
// beforehand would cost a pass over them every call: the rows of an indptr,
// trusted only as far as they are read, and the first bad position a pass
// meets, raised once the pass ends (on a GPU, from flags read with one copy).
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/device.h"

namespace glt {

// Whether a row's entries [first, last), as an indptr gives them, lie among
// the num_entries of indices. An op trusts no indptr it is given (checking
// one whole would read all of it every call): it reads only the rows that
// pass, as the CUDA kernels do (kBadRow).
GLT_HOST_DEVICE GLT_INLINE bool row_in_bounds(int64_t first, int64_t last, int64_t num_entries) {
  return 0 <= first && first <= last && last <= num_entries;
}

// The error of ids `name`, whose least is lo and greatest hi, not all in
// [0, upper): check_range's (checks.h) and a reading pass's.
inline void raise_ids_outside(int64_t lo, int64_t hi, int64_t upper, const char* name) {
  TORCH_CHECK_VALUE(false, name, " holds ids outside [0, ", upper, "): min ", lo, ", max ", hi);
}

// That error for the n ids at v, some of them outside [0, upper), where a
// pass over them found one as it read them.
inline void raise_ids_outside(const int64_t* v, int64_t n, int64_t upper, const char* name) {
  const auto [lo, hi] = std::minmax_element(v, v + n);
  raise_ids_outside(*lo, *hi, upper, name);
}

// The error of row `row`, whose entries [first, last) lie outside indices.
inline void raise_bad_row(int64_t row, int64_t first, int64_t last, int64_t num_entries) {
  TORCH_CHECK_VALUE(false, "indptr gives row ", row, " entries [", first, ", ", last,
                    ") outside indices (", num_entries, " entries)");
}

// The flags a check pass of a kernel fills: `n` slots, each "none"
// (INT64_MAX) until the pass records a position (an atomic min).
inline at::Tensor no_flags(int64_t n, const at::TensorOptions& options) {
  return at::full({n}, INT64_MAX, options.dtype(at::kLong));
}

// The flags on the host (the one wait for the device of a call).
inline std::vector<int64_t> read_flags(const at::Tensor& flags) {
  const at::Tensor host = flags.cpu();
  const int64_t* v = host.data_ptr<int64_t>();
  return std::vector<int64_t>(v, v + host.numel());
}

// Raises where a kernel's pass flagged (flags[0]) a position whose row,
// rows[position], lies outside indices.
inline void check_rows_read(const at::Tensor& flags, const at::Tensor& rows,
                            const at::Tensor& indptr, int64_t num_entries) {
  const int64_t bad = read_flags(flags)[0];
  if (bad == std::numeric_limits<int64_t>::max()) return;
  const int64_t row = rows[bad].item<int64_t>();
  raise_bad_row(row, indptr[row].item<int64_t>(), indptr[row + 1].item<int64_t>(), num_entries);
}

// The error of row `row` of `indptr` (host memory), its entries outside
// indices' num_entries.
template <typename index_t>
void raise_bad_row(const index_t* indptr, int64_t row, int64_t num_entries) {
  raise_bad_row(row, indptr[row], indptr[row + 1], num_entries);
}

// The lowest position at which a parallel loop met an input it could not
// use, for the loop to raise once it ends.
class FirstBad {
 public:
  void note(int64_t i) {
    int64_t seen = position_.load(std::memory_order_relaxed);
    while (i < seen && !position_.compare_exchange_weak(seen, i, std::memory_order_relaxed)) {
    }
  }
  bool any() const { return position() != kNone; }
  int64_t position() const { return position_.load(std::memory_order_relaxed); }

 private:
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::atomic<int64_t> position_{kNone};
};

}  // namespace glt
