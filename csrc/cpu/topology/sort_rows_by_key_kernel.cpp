// Sorting each row's entries by a key (a temporal sampler's entry times):
// rows in parallel, each checked first and sorted only if it is not, so a
// topology in time order costs one read of the keys.
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <utility>
#include <vector>

#include "checks.h"
#include "cpu/runtime/parallel.h"

namespace glt::cpu {
namespace {

constexpr int64_t kRowGrain = 4096;

// Checks that ptr starts at 0, never decreases and ends at num_entries.
template <typename index_t>
void check_row_pointers(const index_t* ptr, int64_t num_rows, int64_t num_entries) {
  TORCH_CHECK_VALUE(ptr[0] == 0, "indptr must start at 0, got ", ptr[0]);
  for (int64_t r = 0; r < num_rows; ++r) {
    TORCH_CHECK_VALUE(ptr[r] <= ptr[r + 1], "indptr must be non-decreasing, but row ", r,
                      " ends at ", ptr[r + 1], " before it starts at ", ptr[r]);
  }
  TORCH_CHECK_VALUE(ptr[num_rows] == num_entries, "indptr ends at ", ptr[num_rows],
                    " but keys holds ", num_entries, " entries");
}

// The first row whose keys decrease somewhere, or -1.
template <typename index_t, typename key_t>
int64_t first_unsorted_row(const index_t* ptr, int64_t num_rows, const key_t* keys) {
  std::atomic<int64_t> first{num_rows};
  glt::cpu::parallel_for(0, num_rows, kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end && r < first.load(std::memory_order_relaxed); ++r) {
      if (!std::is_sorted(keys + ptr[r], keys + ptr[r + 1])) {
        int64_t seen = first.load();
        while (r < seen && !first.compare_exchange_weak(seen, r)) {
        }
        return;
      }
    }
  });
  return first.load() == num_rows ? -1 : first.load();
}

// order[j] for every entry: stored positions, each row's stably sorted by key.
template <typename index_t, typename key_t>
void fill_order(const index_t* ptr, int64_t num_rows, const key_t* keys, int64_t* order) {
  std::vector<std::vector<std::pair<key_t, int64_t>>> scratch(kernel_threads());
  glt::cpu::parallel_for_workers(0, num_rows, kRowGrain, [&](int64_t begin, int64_t end,
                                                             int64_t worker) {
    auto& entries = scratch[worker];
    for (int64_t r = begin; r < end; ++r) {
      const int64_t lo = ptr[r], hi = ptr[r + 1];
      std::iota(order + lo, order + hi, lo);
      if (std::is_sorted(keys + lo, keys + hi)) continue;
      entries.resize(hi - lo);
      for (int64_t j = lo; j < hi; ++j) entries[j - lo] = {keys[j], j};
      std::sort(entries.begin(), entries.end());  // positions break ties: stable
      for (int64_t j = lo; j < hi; ++j) order[j] = entries[j - lo].second;
    }
  });
}

// (order, first unsorted row) of rows keyed by `keys` (key_t entries).
template <typename index_t, typename key_t>
std::tuple<at::Tensor, int64_t> sort_rows(const index_t* ptr, int64_t num_rows,
                                          const at::Tensor& keys) {
  const key_t* k = keys.data_ptr<key_t>();
  const int64_t first = first_unsorted_row(ptr, num_rows, k);
  auto order = at::empty({first < 0 ? 0 : keys.numel()}, keys.options().dtype(at::kLong));
  if (first >= 0) fill_order(ptr, num_rows, k, order.data_ptr<int64_t>());
  return {order, first};
}

}  // namespace

std::tuple<at::Tensor, int64_t> sort_rows_by_key_kernel(const at::Tensor& indptr,
                                                        const at::Tensor& keys) {
  TORCH_CHECK_VALUE(indptr.dim() == 1 && indptr.numel() >= 1,
                    "indptr must be 1-D with at least one entry, got shape ", indptr.sizes());
  TORCH_CHECK_VALUE(indptr.scalar_type() == at::kLong || indptr.scalar_type() == at::kInt,
                    "indptr must be int32 or int64, got ", indptr.scalar_type());
  TORCH_CHECK_VALUE(keys.scalar_type() == at::kLong || keys.scalar_type() == at::kDouble,
                    "keys must be int64 or float64, got ", keys.scalar_type());
  TORCH_CHECK_VALUE(keys.dim() == 1, "keys must be 1-D, got shape ", keys.sizes());
  check_device(keys, "keys", indptr.device());
  TORCH_CHECK_VALUE(indptr.device().is_cpu(), "sort_rows_by_key runs on the CPU, got ",
                    indptr.device());
  const auto ptr_c = indptr.contiguous();
  const auto keys_c = keys.contiguous();
  const int64_t num_rows = ptr_c.numel() - 1;
  std::tuple<at::Tensor, int64_t> out;
  AT_DISPATCH_INDEX_TYPES(ptr_c.scalar_type(), "sort_rows_by_key", [&] {
    const index_t* ptr = ptr_c.data_ptr<index_t>();
    check_row_pointers(ptr, num_rows, keys_c.numel());
    if (keys_c.scalar_type() == at::kLong) {
      out = sort_rows<index_t, int64_t>(ptr, num_rows, keys_c);
    } else {
      out = sort_rows<index_t, double>(ptr, num_rows, keys_c);
    }
  });
  return out;
}

TORCH_LIBRARY_IMPL(glt, CPU, m) { m.impl("sort_rows_by_key", TORCH_FN(sort_rows_by_key_kernel)); }

}  // namespace glt::cpu
