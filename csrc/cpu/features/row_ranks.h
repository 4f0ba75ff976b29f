// Row ranks: the id-to-row map of a table whose rows are in id order, as
// [words, 2] int64 pairs (rows before the word's first id, presence bits of
// its 64 ids); built by row_ranks (gather.h).
#pragma once

#include <cstdint>

namespace glt::cpu {

// The set bits of `x`. `__builtin_popcountll` is a call into libgcc unless
// the build targets POPCNT (it does not: the extension runs on any x86-64);
// this branch-free count takes a few instructions inline.
inline int64_t count_bits(uint64_t x) {
#if defined(__POPCNT__) || !(defined(__x86_64__) || defined(__i386__))
  return __builtin_popcountll(x);
#else
  x = x - ((x >> 1) & 0x5555555555555555ULL);
  x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
  return static_cast<int64_t>((x * 0x0101010101010101ULL) >> 56);
#endif
}

// The row of `id` in ranks of `num_words` words, or -1 when the table does
// not hold it.
inline int64_t ranked_row(const int64_t* ranks, int64_t num_words, int64_t id) {
  if (id < 0 || (id >> 6) >= num_words) return -1;
  const int64_t* word = ranks + 2 * (id >> 6);
  const uint64_t bits = static_cast<uint64_t>(word[1]);
  const uint64_t bit = uint64_t{1} << (id & 63);
  if (!(bits & bit)) return -1;
  return word[0] + count_bits(bits & (bit - 1));
}

}  // namespace glt::cpu
