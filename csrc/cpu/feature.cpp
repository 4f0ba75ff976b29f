// Feature row gather: out[i] = table[id2index[ids[i]]] (or
// out[positions[i]] = ...), parallel over ids, with the rows a few ids ahead
// prefetched.
#include <ATen/Parallel.h>

#include <atomic>
#include <cstring>

#include "../common.h"
#include "buffer_pool.h"
#include "ops.h"

namespace glt {
namespace {

constexpr int64_t kPrefetchDistance = 8;
constexpr int64_t kPrefetchLines = 16;

}  // namespace

at::Tensor gather_rows(const at::Tensor& table, const at::Tensor& ids,
                       const std::optional<at::Tensor>& id2index,
                       const std::shared_ptr<BufferPool>& pool,
                       const std::optional<at::Tensor>& positions, int64_t num_out_rows) {
  TORCH_CHECK_VALUE(table.device().is_cpu(), "feature table must be a CPU tensor");
  TORCH_CHECK_VALUE(table.dim() == 2, "feature table must be 2-D, got shape ",
              table.sizes());
  TORCH_CHECK_VALUE(table.is_contiguous(), "feature table must be contiguous");
  check_index(ids, "ids");
  const int64_t num_rows = table.size(0);
  const int64_t* map = nullptr;
  int64_t num_ids = num_rows;
  if (id2index.has_value()) {
    check_index(*id2index, "id2index");
    TORCH_CHECK_VALUE(id2index->is_contiguous(), "id2index must be contiguous");
    map = id2index->data_ptr<int64_t>();
    num_ids = id2index->numel();
  }
  const auto id_t = ids.contiguous();
  const int64_t n = id_t.numel();
  const int64_t* id = id_t.data_ptr<int64_t>();
  // Row i of the output is row i, or row positions[i] of num_out_rows.
  const int64_t* pos = nullptr;
  at::Tensor pos_t;
  int64_t out_rows = n;
  if (positions.has_value()) {
    check_index(*positions, "positions");
    TORCH_CHECK_VALUE(positions->numel() == n, "positions holds ", positions->numel(),
                      " entries for ", n, " ids");
    TORCH_CHECK_VALUE(num_out_rows >= 0, "num_out_rows must be given with positions");
    pos_t = positions->contiguous();
    check_range(pos_t, num_out_rows, "positions");
    pos = pos_t.data_ptr<int64_t>();
    out_rows = num_out_rows;
  }
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
  at::parallel_for(0, n, 256, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
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
        while (i < cur && !first_bad.compare_exchange_weak(cur, i)) {}
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
    TORCH_CHECK_VALUE(false, "id ", v, " has no feature row (id2index gives ",
                map[v], " for a table of ", num_rows, " rows)");
  }
  return out;
}

}  // namespace glt
