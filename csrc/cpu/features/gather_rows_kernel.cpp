// Feature row gather: out[i] = table[id2index[ids[i]]] (or
// out[positions[i]] = ...), parallel over ids, with the rows a few ids ahead
// prefetched.
#include <torch/library.h>

#include <atomic>
#include <cstring>

#include "checks.h"
#include "cpu/runtime/buffer_pool.h"
#include "cpu/features/gather.h"
#include "cpu/runtime/parallel.h"

namespace glt::cpu {
namespace {

constexpr int64_t kPrefetchDistance = 8;
constexpr int64_t kPrefetchLines = 16;

}  // namespace

at::Tensor gather_rows(const at::Tensor& table, const at::Tensor& ids,
                       const std::optional<at::Tensor>& id2index,
                       const std::shared_ptr<BufferPool>& pool,
                       const std::optional<at::Tensor>& positions, int64_t num_out_rows) {
  TORCH_CHECK_VALUE(table.device().is_cpu(), "feature table must be a CPU tensor");
  const auto args = checked_gather_args(table, ids, id2index, positions, num_out_rows);
  const int64_t num_rows = table.size(0);
  const int64_t* map = args.id2index.defined() ? args.id2index.data_ptr<int64_t>() : nullptr;
  const int64_t num_ids = map ? args.id2index.numel() : num_rows;
  const int64_t n = args.ids.numel();
  const int64_t* id = args.ids.data_ptr<int64_t>();
  // Row i of the output is row i, or row positions[i] of num_out_rows.
  // (An empty positions tensor may have no data pointer: test definedness,
  // so that no local rows still give num_out_rows rows for remote ones.)
  const bool with_positions = args.positions.defined();
  const int64_t* pos = with_positions ? args.positions.data_ptr<int64_t>() : nullptr;
  const int64_t out_rows = with_positions ? num_out_rows : n;
  auto out = pool ? pool->empty({out_rows, table.size(1)}, table.scalar_type())
                  : at::empty({out_rows, table.size(1)}, table.options());
  const int64_t row_bytes = table.size(1) * table.element_size();
  if (n == 0 || row_bytes == 0) return out;
  const char* src = static_cast<const char*>(table.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());

  auto resolve = [&](int64_t i) -> int64_t {
    const int64_t v = id[i];
    if (v < 0 || v >= num_ids) return -1;
    const int64_t r = map ? map[v] : v;
    return (r >= 0 && r < num_rows) ? r : -1;
  };
  std::atomic<int64_t> first_bad{n};
  glt::cpu::parallel_for(0, n, 256, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      // Two stages ahead: the id2index entry, then (once it is in cache) the row.
      if (map && i + 2 * kPrefetchDistance < end) {
        const int64_t v = id[i + 2 * kPrefetchDistance];
        if (v >= 0 && v < num_ids) __builtin_prefetch(map + v);
      }
      if (i + kPrefetchDistance < end) {
        const int64_t f = resolve(i + kPrefetchDistance);
        if (f >= 0) {
          const char* p = src + f * row_bytes;
          for (int64_t b = 0; b < row_bytes && b < kPrefetchLines * 64; b += 64)
            __builtin_prefetch(p + b);
        }
      }
      const int64_t r = resolve(i);
      if (r < 0) {
        int64_t cur = first_bad.load();
        while (i < cur && !first_bad.compare_exchange_weak(cur, i)) {
        }
        continue;
      }
      std::memcpy(dst + (pos ? pos[i] : i) * row_bytes, src + r * row_bytes, row_bytes);
    }
  });
  const int64_t bad = first_bad.load();
  if (bad < n) {
    const int64_t v = id[bad];
    TORCH_CHECK_VALUE(v >= 0 && v < num_ids, "id ", v, " is out of range [0, ", num_ids,
                      ") of the feature");
    TORCH_CHECK_VALUE(false, "id ", v, " has no feature row (id2index gives ", map[v],
                      " for a table of ", num_rows, " rows)");
  }
  return out;
}

at::Tensor gather_rows_kernel(const at::Tensor& table, const at::Tensor& ids,
                              const std::optional<at::Tensor>& id2index,
                              const std::optional<at::Tensor>& positions, int64_t num_out_rows) {
  return gather_rows(table, ids, id2index, nullptr, positions, num_out_rows);
}

TORCH_LIBRARY_IMPL(glt, CPU, m) { m.impl("gather_rows", TORCH_FN(gather_rows_kernel)); }

}  // namespace glt::cpu
