// ids grouped by the partition a book gives them: the partitions looked up
// in parallel (the book entries a few ids ahead prefetched), then the stable
// counting sort of bucket.h, which writes positions and ids together.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <atomic>
#include <memory>

#include "bucket.h"

namespace glt {
namespace {

constexpr int64_t kLookAhead = 16;

std::tuple<at::Tensor, at::Tensor, at::Tensor> group_by_partition_kernel(const at::Tensor& book,
                                                                         const at::Tensor& ids,
                                                                         int64_t num_partitions) {
  TORCH_CHECK_VALUE(book.dim() == 1, "book must be 1-D, got shape ", book.sizes());
  TORCH_CHECK_VALUE(at::isIntegralType(book.scalar_type(), /*includeBool=*/false),
                    "book must be an integer tensor, got ", book.scalar_type());
  TORCH_CHECK_VALUE(ids.dim() == 1 && ids.scalar_type() == at::kLong,
                    "ids must be a 1-D int64 tensor, got ", ids.scalar_type(), " of shape ",
                    ids.sizes());
  TORCH_CHECK_VALUE(num_partitions >= 1, "num_partitions must be at least 1, got ", num_partitions);
  const auto book_c = book.contiguous();
  const auto ids_c = ids.contiguous();
  const int64_t n = ids_c.numel();
  const int64_t num_ids = book_c.numel();
  const int64_t* id = ids_c.data_ptr<int64_t>();
  auto order = at::empty({n}, ids_c.options());
  auto counts = at::empty({num_partitions}, ids_c.options());
  auto grouped = at::empty({n}, ids_c.options());
  // The partitions, narrowed (they are below num_partitions once checked),
  // and not initialised: every entry is written.
  std::unique_ptr<int32_t[]> part(new int32_t[n]);
  std::atomic<int64_t> first_bad{n};
  auto flag = [&](int64_t i) {
    int64_t cur = first_bad.load();
    while (i < cur && !first_bad.compare_exchange_weak(cur, i)) {
    }
  };
  AT_DISPATCH_INTEGRAL_TYPES(book_c.scalar_type(), "group_by_partition", [&] {
    const scalar_t* entry = book_c.data_ptr<scalar_t>();
    at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        if (i + kLookAhead < end) {
          const int64_t ahead = id[i + kLookAhead];
          if (ahead >= 0 && ahead < num_ids) __builtin_prefetch(entry + ahead);
        }
        const int64_t v = id[i];
        const int64_t p = v >= 0 && v < num_ids ? static_cast<int64_t>(entry[v]) : -1;
        if (p < 0 || p >= num_partitions) {
          flag(i);
          part[i] = 0;
          continue;
        }
        part[i] = static_cast<int32_t>(p);
      }
    });
    const int64_t bad = first_bad.load();
    if (bad < n) {
      const int64_t v = id[bad];
      TORCH_CHECK_VALUE(v >= 0 && v < num_ids, "ids[", bad, "] is ", v, ", outside the book's ",
                        num_ids, " ids");
      TORCH_CHECK_VALUE(false, "the book gives id ", v, " partition ",
                        static_cast<int64_t>(entry[v]), ", outside [0, ", num_partitions, ")");
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

}  // namespace glt
