// ids grouped by the partition a book gives them: the ids range-checked, the
// partitions looked up in parallel in a branch-free loop (the book is best
// narrow: PartitionBook.group passes an int8 copy, which stays in cache),
// then the stable counting sort of bucket.h, which writes positions and ids
// together.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <memory>

#include "cpu/partitions/bucket.h"
#include "cpu/runtime/parallel.h"
#include "partition_checks.h"

namespace glt::cpu {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor> group_by_partition_kernel(const at::Tensor& book,
                                                                         const at::Tensor& ids,
                                                                         int64_t num_partitions) {
  const auto [book_c, ids_c] = checked_group_args(book, ids, num_partitions);
  const int64_t n = ids_c.numel();
  const int64_t num_ids = book_c.numel();
  const int64_t* id = ids_c.data_ptr<int64_t>();
  auto order = at::empty({n}, ids_c.options());
  auto counts = at::empty({num_partitions}, ids_c.options());
  auto grouped = at::empty({n}, ids_c.options());
  // The ids are checked first, in one sequential min/max pass, so the lookup
  // loop has no branch on them.
  int64_t lo = n > 0 ? id[0] : 0;
  int64_t hi = n > 0 ? id[0] : -1;
  for (int64_t i = 1; i < n; ++i) {
    lo = std::min(lo, id[i]);
    hi = std::max(hi, id[i]);
  }
  if (lo < 0 || hi >= num_ids) {
    const int64_t bad =
        std::find_if(id, id + n, [&](int64_t v) { return v < 0 || v >= num_ids; }) - id;
    TORCH_CHECK_VALUE(false, "ids[", bad, "] is ", id[bad], ", outside the book's ", num_ids,
                      " ids");
  }
  // The partitions, narrowed (checked below to be in [0, num_partitions)),
  // and not initialised: every entry is written.
  std::unique_ptr<int32_t[]> part(new int32_t[n]);
  AT_DISPATCH_INTEGRAL_TYPES(book_c.scalar_type(), "group_by_partition", [&] {
    const scalar_t* entry = book_c.data_ptr<scalar_t>();
    std::atomic<bool> any_bad{false};
    glt::cpu::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
      // Local pointers: the loop keeps them in registers (through the
      // lambda's captures it reloads them after every store).
      const int64_t* __restrict__ in = id;
      const scalar_t* __restrict__ table = entry;
      int32_t* __restrict__ out = part.get();
      const uint64_t limit = static_cast<uint64_t>(num_partitions);
      bool bad = false;
      for (int64_t i = begin; i < end; ++i) {
        const int64_t p = static_cast<int64_t>(table[in[i]]);
        bad |= static_cast<uint64_t>(p) >= limit;
        out[i] = static_cast<int32_t>(p);
      }
      if (bad) any_bad = true;
    });
    if (any_bad) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t p = static_cast<int64_t>(entry[id[i]]);
        TORCH_CHECK_VALUE(p >= 0 && p < num_partitions, "the book gives id ", id[i], " partition ",
                          p, ", outside [0, ", num_partitions, ")");
      }
    }
  });
  bucket(part.get(), n, num_partitions, order.data_ptr<int64_t>(), counts.data_ptr<int64_t>(), id,
         grouped.data_ptr<int64_t>());
  return {order, counts, grouped};
}

}  // namespace

TORCH_LIBRARY_IMPL(glt, CPU, m) {
  m.impl("group_by_partition", TORCH_FN(group_by_partition_kernel));
}

}  // namespace glt::cpu
