// The inducer's hash tables (one per node type: the node ids known and
// their local ids) and the passes that look nodes up and add them, for any
// backend (csrc/kernels/inducer.h says how an insert keeps first-appearance
// order).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <limits>

#include "kernels/hash_table.h"

namespace glt {
namespace kernels {

constexpr int64_t kUnclaimed = std::numeric_limits<int64_t>::min();

// One node type's table: the node ids known and their local ids.
struct IdTable {
  at::Tensor keys, vals;  // hash slots (device::kEmptyKey / kUnclaimed when free)
  int64_t capacity = 0;
  int64_t size = 0;  // nodes known
};

// Free functions rather than members: nvcc takes extended lambdas only in
// functions whose address can be taken.

inline void allocate_table(IdTable& table, int64_t capacity, const at::TensorOptions& options) {
  table.keys = at::full({capacity}, device::kEmptyKey, options);
  table.vals = at::full({capacity}, kUnclaimed, options);
  table.capacity = capacity;
}

// Empties a table's slots, keys and values in one pass.
template <typename Backend>
void clear_table(const Backend& backend, IdTable& table) {
  int64_t* keys = table.keys.data_ptr<int64_t>();
  int64_t* vals = table.vals.data_ptr<int64_t>();
  backend.for_each(table.capacity, [=] GLT_HOST_DEVICE(int64_t i) {
    keys[i] = device::kEmptyKey;
    vals[i] = kUnclaimed;
  });
  table.size = 0;
}

// Makes room for `more` nodes, moving the known ones to a larger table.
template <typename Backend>
void reserve_table(const Backend& backend, IdTable& table, int64_t more,
                   const at::TensorOptions& options) {
  const int64_t capacity = device::table_capacity(table.size + more);
  if (capacity <= table.capacity) return;
  IdTable old = table;
  allocate_table(table, capacity, options);
  const int64_t* old_keys = old.keys.data_ptr<int64_t>();
  const int64_t* old_vals = old.vals.data_ptr<int64_t>();
  int64_t* keys = table.keys.data_ptr<int64_t>();
  int64_t* vals = table.vals.data_ptr<int64_t>();
  const uint64_t mask = table.capacity - 1;
  backend.for_each(old.capacity, [=] GLT_HOST_DEVICE(int64_t i) {
    if (old_keys[i] == device::kEmptyKey) return;
    vals[device::hash_insert(keys, mask, old_keys[i])] = old_vals[i];
  });
}

// Local ids of `ids` in a table (-1 for unknown ones).
template <typename Backend>
at::Tensor lookup_table(const Backend& backend, const IdTable& table, const at::Tensor& ids) {
  auto out = at::empty({ids.numel()}, ids.options());
  const int64_t* key = ids.data_ptr<int64_t>();
  const int64_t* keys = table.keys.data_ptr<int64_t>();
  const int64_t* vals = table.vals.data_ptr<int64_t>();
  const uint64_t mask = table.capacity - 1;
  int64_t* local = out.data_ptr<int64_t>();
  backend.for_each(ids.numel(), [=] GLT_HOST_DEVICE(int64_t i) {
    const int64_t slot = key[i] < 0 ? -1 : device::hash_find(keys, mask, key[i]);
    local[i] = slot < 0 ? -1 : vals[slot];
  });
  return out;
}

// Where an insert's results go besides the returned buffer: each added id's
// local id to local[at + i] (-1 for the others; `at` read on the device, 0
// where null), and the new ids to nodes[size + rank] (the type's node list,
// its entries numbered by local id) rather than to a buffer of their own;
// once every id is in, the count of ids it took (*count, or all) to *total
// and added to *advance, where given (a request's edge count, its edge
// type's: no kernel of their own).
struct InsertTargets {
  int64_t* local = nullptr;
  const int64_t* at = nullptr;
  int64_t* nodes = nullptr;
  int64_t* total = nullptr;
  int64_t* advance = nullptr;
  // Then, where `sizes` is given, marks[t * stride + h] = sizes[t] for each
  // of `types` node types (a whole batch's node counts as a hop ends).
  struct {
    const int64_t* sizes = nullptr;
    int64_t* marks = nullptr;
    int64_t types = 0, stride = 0, h = 0;
  } mark;
};

// An insert's first pass, position by position: position i claims its id's
// slot of a table (slot[i]; -1 for no id) and offers the slot its position
// (an atomic max of -(i + 2): the first position's offer stays). A kernel
// that makes the ids claims them as it writes them (draw_bounded), sparing
// the insert this pass.
struct SlotClaims {
  int64_t* keys = nullptr;
  int64_t* vals = nullptr;
  uint64_t mask = 0;
  int64_t* slot = nullptr;

  GLT_HOST_DEVICE void claim(int64_t i, int64_t key) const {
    if (key < 0) {
      slot[i] = -1;
      return;
    }
    const int64_t s = device::hash_insert(keys, mask, key);
    slot[i] = s;
    device::atomic_max(&vals[s], -(i + 2));
  }
  GLT_HOST_DEVICE void skip(int64_t i) const { slot[i] = -1; }
};

// The claims of `table` into `slots` (int64, a position each).
inline SlotClaims slot_claims(IdTable& table, at::Tensor& slots) {
  return {table.keys.data_ptr<int64_t>(), table.vals.data_ptr<int64_t>(),
          static_cast<uint64_t>(table.capacity - 1), slots.data_ptr<int64_t>()};
}

// Adds ids[i] for i < *count (every id when `count` is null; negative ids
// never) to `table`, numbering the new ones from *size in order of first
// appearance; then *size and *fresh_count grow by their number. Returns the
// new ids in a buffer of ids.numel() entries (the first *fresh_count hold
// them; an empty tensor where `out.nodes` takes them). `table` must have
// room for them all. `claimed`, where given, holds each position's slot,
// claimed already (SlotClaims).
template <typename Backend>
at::Tensor insert_bounded(const Backend& backend, IdTable& table, const at::Tensor& ids,
                          const int64_t* count, int64_t* size, int64_t* fresh_count,
                          InsertTargets out, at::Tensor claimed = at::Tensor()) {
  const int64_t n = ids.numel();
  const auto options = ids.options();
  auto fresh = at::empty({out.nodes ? 0 : n}, options);
  if (n == 0) return fresh;
  at::Tensor slots = claimed.defined() ? claimed : at::empty({n}, options);
  auto first = at::empty({n}, options);
  const int64_t* key = ids.data_ptr<int64_t>();
  const SlotClaims claims = slot_claims(table, slots);
  int64_t* vals = claims.vals;
  const int64_t* slot = claims.slot;
  int64_t* is_first = first.data_ptr<int64_t>();
  if (!claimed.defined()) {
    backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
      if (count != nullptr && i >= *count) return claims.skip(i);
      claims.claim(i, key[i]);
    });
  }
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
    is_first[i] = slot[i] >= 0 && vals[slot[i]] == -(i + 2);
  });
  const auto firsts = first.cumsum(0);  // a new id's rank among them: its count - 1
  const int64_t* upto = firsts.data_ptr<int64_t>();
  int64_t* fresh_ids = out.nodes ? out.nodes : fresh.data_ptr<int64_t>();
  const bool at_size = out.nodes != nullptr;
  // A new id's first position numbers it; every position reads its local
  // id in the same pass: its slot holds a local id (known before, or just
  // numbered), or still -(j + 2), j its first position, whose number the
  // prefix sum gives.
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
    const int64_t s = slot[i];
    int64_t id = -1;
    if (s >= 0 && is_first[i]) {
      id = *size + upto[i] - 1;
      device::atomic_store(&vals[s], id);
      fresh_ids[(at_size ? *size : 0) + upto[i] - 1] = key[i];
    } else if (s >= 0) {
      const int64_t held = device::atomic_load(&vals[s]);
      id = held >= 0 ? held : *size + upto[-(held + 2)] - 1;
    }
    if (out.local != nullptr) out.local[(out.at ? *out.at : 0) + i] = id;
  });
  backend.for_each(1, [=] GLT_HOST_DEVICE(int64_t) {
    const int64_t added = upto[n - 1];
    *fresh_count += added;
    *size += added;
    const int64_t taken = count != nullptr ? *count : n;
    if (out.total != nullptr) *out.total = taken;
    if (out.advance != nullptr) *out.advance += taken;
    for (int64_t t = 0; out.mark.sizes != nullptr && t < out.mark.types; ++t) {
      out.mark.marks[t * out.mark.stride + out.mark.h] = out.mark.sizes[t];
    }
  });
  return fresh;
}

}  // namespace kernels
}  // namespace glt
