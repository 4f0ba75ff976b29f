// A compact id-to-row map for a table whose rows hold their ids in ascending
// order (a partition's own rows, as the partitioners write them): one bit
// per id says whether the table has it, and each 64-id word carries the
// rows before it, so the row of an id is that count plus the set bits below
// it in its word. 16 bytes per 64 ids instead of an int64 per id: a map
// that stays in cache while the rows stream past (see row_ranks.h).
#include "cpu/features/row_ranks.h"

#include <algorithm>

#include "checks.h"
#include "cpu/features/gather.h"

namespace glt::cpu {

std::optional<at::Tensor> row_ranks(const at::Tensor& id2index) {
  check_index(id2index, "id2index");
  TORCH_CHECK_VALUE(id2index.device().is_cpu(), "id2index must be a CPU tensor");
  const auto map = id2index.contiguous();
  const int64_t n = map.numel();
  const int64_t words = (n + 63) / 64;
  auto ranks = at::zeros({words, 2}, map.options());
  const int64_t* row = map.data_ptr<int64_t>();
  int64_t* out = ranks.data_ptr<int64_t>();
  int64_t next = 0;  // the row the next present id must have
  for (int64_t w = 0; w < words; ++w) {
    out[2 * w] = next;
    uint64_t bits = 0;
    const int64_t end = std::min(n, (w + 1) * 64);
    for (int64_t id = w * 64; id < end; ++id) {
      if (row[id] < 0) continue;
      if (row[id] != next) return std::nullopt;  // rows not in id order
      bits |= uint64_t{1} << (id - w * 64);
      ++next;
    }
    out[2 * w + 1] = static_cast<int64_t>(bits);
  }
  return ranks;
}

}  // namespace glt::cpu
