// Row ranks: the id-to-row map of a table whose rows are in id order, as
// [words, 2] int64 pairs (rows before the word's first id, presence bits of
// its 64 ids); built by row_ranks (ops.h).
#pragma once

#include <cstdint>

namespace glt {

// The row of `id` in ranks of `num_words` words, or -1 when the table does
// not hold it.
inline int64_t ranked_row(const int64_t* ranks, int64_t num_words, int64_t id) {
  if (id < 0 || (id >> 6) >= num_words) return -1;
  const int64_t* word = ranks + 2 * (id >> 6);
  const uint64_t bits = static_cast<uint64_t>(word[1]);
  const uint64_t bit = uint64_t{1} << (id & 63);
  if (!(bits & bit)) return -1;
  return word[0] + __builtin_popcountll(bits & (bit - 1));
}

}  // namespace glt
