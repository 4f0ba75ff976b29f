// An open-addressing hash table of int64 keys, filled by many threads at once
// (linear probing, keys claimed by compare-and-swap). Its slots live in two
// tensors of a power-of-two length, `keys` (kEmptyKey where free) and `vals`.
#pragma once

#include "kernels/device.h"

namespace glt::kernels::device {

constexpr int64_t kEmptyKey = -1;

GLT_HOST_DEVICE GLT_INLINE uint64_t hash_slot(int64_t key, uint64_t mask) {
  return mix64(static_cast<uint64_t>(key)) & mask;
}

// The slot of `key` (>= 0), claiming a free one if it is absent. The table
// must have a free slot.
GLT_HOST_DEVICE GLT_INLINE int64_t hash_insert(int64_t* keys, uint64_t mask, int64_t key) {
  uint64_t i = hash_slot(key, mask);
  while (true) {
    const int64_t found = atomic_cas(&keys[i], kEmptyKey, key);
    if (found == kEmptyKey || found == key) return static_cast<int64_t>(i);
    i = (i + 1) & mask;
  }
}

// The slot of `key`, or -1 when it is absent (no insert may run at the same
// time).
GLT_HOST_DEVICE GLT_INLINE int64_t hash_find(const int64_t* keys, uint64_t mask, int64_t key) {
  uint64_t i = hash_slot(key, mask);
  while (true) {
    const int64_t k = keys[i];
    if (k == key) return static_cast<int64_t>(i);
    if (k == kEmptyKey) return -1;
    i = (i + 1) & mask;
  }
}

// The smallest power of two >= 2 * n (at least 16): a table at most half full.
inline int64_t table_capacity(int64_t n) {
  int64_t cap = 16;
  while (cap < 2 * n) cap <<= 1;
  return cap;
}

}  // namespace glt::kernels::device
