// The inducer's id maps (cpu/inducer/id_map.h): global node ids to local ids,
// a hash table or an id-indexed array, inserted one key at a time, in order
// (the insert by many threads at once, with the same result, is in
// id_map_parallel.cpp).
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <memory>
#include <thread>

#include "checks.h"
#include "cpu/inducer/id_map.h"
#include "cpu/runtime/parallel.h"

namespace glt::cpu {
namespace {

constexpr int kInitialBits = 10;
// What an id-indexed map is filled with: below every entry of a batch.
constexpr int32_t kAbsent = INT32_MIN;
// Keys per share of a parallel scan of keys.
constexpr int64_t kScanGrain = 16384;
// The one-pass insert reads nothing else (a parallel insert's passes look 16
// keys ahead): it can keep more misses in flight (measured: 64 over 32, +4%
// batches/s at 1 and 2 threads; 128 no more).
constexpr int64_t kInsertPrefetchAhead = 64;
// Keys a hash table takes room for at a time in an ordered insert: it grows
// with the distinct keys, not with all the keys, which repeat (measured: 16 MB
// a sampling process, not 32 MB, on bench_dist_memory's graph of 24 M nodes).
constexpr int64_t kHashedInsertChunk = int64_t{1} << 16;
// Claims a parallel insert into an id-indexed map has room for at first
// (more: dense_room makes room).
constexpr int64_t kInitialHeadroom = int64_t{1} << 20;

inline int floor_log2(uint64_t x) { return x ? 63 - __builtin_clzll(x) : 0; }

}  // namespace

int64_t* KeyLog::extend(int64_t n) {
  reserve(size_ + n);
  if (!buffer_.defined()) return nullptr;  // no key yet, and none to come (n == 0)
  int64_t* end = buffer_.data_ptr<int64_t>() + size_;
  size_ += n;
  return end;
}

void KeyLog::reserve(int64_t n) {
  if (may_be_held_) {
    may_be_held_ = false;
    // The keys before the clear keep their memory where a view of them lives
    // on, or where it moved (torch.multiprocessing moves a tensor it sends
    // into shared memory, which the receiver maps: its reads count nowhere).
    const bool held = buffer_.defined() && (buffer_.storage().use_count() > 1 ||
                                            buffer_.data_ptr() != allocated_);
    if (held) {
      last_capacity_ = buffer_.numel();
      buffer_ = at::Tensor();
    }
  }
  const int64_t capacity = buffer_.defined() ? buffer_.numel() : 0;
  if (n <= capacity) return;
  at::Tensor grown = at::empty({std::max({n, 2 * capacity, last_capacity_})}, at::kLong);
  if (size_ > 0) {
    std::copy(buffer_.data_ptr<int64_t>(), buffer_.data_ptr<int64_t>() + size_,
              grown.data_ptr<int64_t>());
  }
  buffer_ = std::move(grown);
  allocated_ = buffer_.data_ptr();
}

void KeyLog::clear() {
  size_ = 0;
  may_be_held_ = true;
}

at::Tensor KeyLog::view_from(int64_t first) const {
  return buffer_.defined() ? buffer_.narrow(0, first, size_ - first) : at::empty({0}, at::kLong);
}

IdMap::IdMap()
    : slots_(1 << kInitialBits, Slot{0, 0}),
      mask_((1 << kInitialBits) - 1),
      shift_(64 - kInitialBits),
      size_(0),
      headroom_(kInitialHeadroom) {}

void IdMap::size_regions() {
  region_bits_ = floor_log2((mask_ + 1) / static_cast<uint64_t>(num_groups_));
}

void IdMap::group_keys(int bits, int64_t num_groups) {
  TORCH_CHECK_VALUE(size_ == 0, "group_keys needs an empty map");
  TORCH_CHECK_VALUE(bits >= 0 && bits <= 62, "bits must be in [0, 62], got ", bits);
  group_bits_ = bits;
  num_groups_ = std::max<int64_t>(num_groups, 1);
  size_regions();
}

void IdMap::use_dense(int64_t num_ids) {
  TORCH_CHECK_VALUE(size_ == 0, "use_dense needs an empty map");
  dense_.assign(num_ids, kAbsent);
  floor_ = lowest_floor();
}

int64_t IdMap::lowest_floor() const { return int64_t{kAbsent} + 1 + headroom_; }

void IdMap::dense_room(int64_t n, int64_t claims) {
  bool rebase = floor_ + size_ + n - 1 > INT32_MAX;
  if (claims > headroom_) {
    headroom_ = std::min<int64_t>(std::max(claims, 2 * headroom_), INT32_MAX);
    rebase = true;  // an entry of an earlier batch may lie in the new headroom
  }
  if (rebase) rebase_dense(n);
}

void IdMap::rebase_dense(int64_t n) {
  TORCH_CHECK_VALUE(lowest_floor() + size_ + n - 1 <= INT32_MAX, "too many nodes in one batch");
  // One pass over the array: this batch's entries move down to the new
  // floor, every other entry becomes kAbsent.
  int32_t* map = dense_.data();
  const int64_t floor = floor_, lowest = lowest_floor();
  const auto rebase = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t v = map[i];
      map[i] = v >= floor ? static_cast<int32_t>(v - floor + lowest) : kAbsent;
    }
  };
  glt::cpu::parallel_for(0, static_cast<int64_t>(dense_.size()), 1 << 18, rebase);
  floor_ = lowest;
}

int64_t IdMap::insert(int64_t key, bool* inserted) {
  if (!dense_.empty()) {
    TORCH_CHECK_VALUE(key < static_cast<int64_t>(dense_.size()), "node id ", key,
                      " is out of range for ", dense_.size(), " nodes");
    TORCH_CHECK_VALUE(size_ < INT32_MAX, "too many nodes in one batch");
    dense_room(1, 0);
    int32_t& slot = dense_[key];
    *inserted = slot < floor_;
    if (*inserted) {
      slot = static_cast<int32_t>(floor_ + size_++);
      inserted_.push_back(key);
    }
    return slot - floor_;
  }
  if (2 * (size_ + 1) > static_cast<int64_t>(slots_.size())) grow();
  TORCH_CHECK_VALUE(size_ < INT32_MAX, "too many nodes in one batch");
  uint64_t i = slot(key);
  while (true) {
    Slot& slot = slots_[i];
    if (slot.generation() != generation_) {
      slot = Slot{key, Slot::pack(size_, generation_)};
      inserted_.push_back(key);
      *inserted = true;
      return size_++;
    }
    if (slot.key == key) {
      *inserted = false;
      return slot.val();
    }
    i = (i + 1) & mask_;
  }
}

int64_t IdMap::find(int64_t key) const {
  if (!dense_.empty()) {
    if (static_cast<uint64_t>(key) >= dense_.size()) return -1;  // negative ones too
    const int64_t local = dense_[key] - floor_;
    return local < 0 ? -1 : local;
  }
  uint64_t i = slot(key);
  while (true) {
    const Slot& slot = slots_[i];
    if (slot.generation() != generation_) return -1;
    if (slot.key == key) return slot.val();
    i = (i + 1) & mask_;
  }
}

at::Tensor IdMap::keys_from(int64_t first) const { return inserted_.view_from(first); }

void IdMap::check_keys(const int64_t* keys, int64_t n) const {
  // Ids are non-negative (a hash table's keys too: a negative one is an error).
  const uint64_t bound = dense_.empty() ? INT64_MAX : dense_.size();
  std::atomic<bool> outside{false};
  glt::cpu::parallel_for(0, n, kScanGrain, [&](int64_t begin, int64_t end) {
    uint64_t any = 0;
    for (int64_t i = begin; i < end; ++i) any |= static_cast<uint64_t>(keys[i]) >= bound;
    if (any) outside = true;
  });
  if (outside) {
    const int64_t* bad =
        std::find_if(keys, keys + n, [&](int64_t k) { return static_cast<uint64_t>(k) >= bound; });
    TORCH_CHECK_VALUE(false, "node id ", *bad, " is out of range for ",
                      dense_.empty() ? "the id map" : std::to_string(bound) + " nodes");
  }
}

void IdMap::insert_hashed_in_order(const int64_t* keys, int64_t n, int64_t* local) {
  // Room for every key first, so that no insert grows the table: then the
  // slots of the keys ahead can be prefetched (a table past the caches
  // costs a miss a key, which the prefetches overlap). The probe loop is
  // insert()'s, inlined: one key costs a hash, a line and a compare.
  reserve(size_ + n);
  Slot* table = slots_.data();
  const uint32_t generation = generation_;
  int64_t* fresh_keys = inserted_.extend(n);  // room for all; the unused tail is dropped
  int64_t num_fresh = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i + kInsertPrefetchAhead < n) {
      __builtin_prefetch(&table[slot(keys[i + kInsertPrefetchAhead])], 1);
    }
    const int64_t key = keys[i];
    for (uint64_t j = slot(key);; j = (j + 1) & mask_) {
      Slot& entry = table[j];
      if (entry.generation() != generation) {
        entry = Slot{key, Slot::pack(size_ + num_fresh, generation)};
        local[i] = size_ + num_fresh;
        fresh_keys[num_fresh++] = key;
        break;
      }
      if (entry.key == key) {
        local[i] = entry.val();
        break;
      }
    }
  }
  size_ += num_fresh;
  inserted_.truncate(size_);
}

void IdMap::insert_in_order(const int64_t* keys, int64_t n, int64_t* local) {
  TORCH_CHECK_VALUE(size_ + n < INT32_MAX, "too many nodes in one batch");
  if (dense_.empty()) {
    const int64_t piece = hashed_piece(n, kHashedInsertChunk);
    for (int64_t first = 0; first < n; first += piece) {
      const int64_t count = std::min(piece, n - first);
      insert_hashed_in_order(keys + first, count, local + first);
    }
    return;
  }
  // One pass: a new id takes the next local id where it first appears.
  dense_room(n, 0);
  int32_t* map = dense_.data();
  const int64_t floor = floor_;
  int64_t* fresh_keys = inserted_.extend(n);  // room for all; the unused tail is dropped
  int64_t num_fresh = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i + kInsertPrefetchAhead < n) __builtin_prefetch(&map[keys[i + kInsertPrefetchAhead]], 1);
    int32_t& slot = map[keys[i]];
    if (slot < floor) {
      slot = static_cast<int32_t>(floor + size_ + num_fresh);
      fresh_keys[num_fresh++] = keys[i];
    }
    local[i] = slot - floor;
  }
  size_ += num_fresh;
  inserted_.truncate(size_);
}

void IdMap::reserve(int64_t n) {
  inserted_.reserve(n);
  if (!dense_.empty()) return;
  while (2 * n > static_cast<int64_t>(slots_.size())) grow();
}

void IdMap::grow() {
  RandomReadArray<Slot> old(slots_.size() * 2, Slot{0, 0});
  old.swap(slots_);
  mask_ = slots_.size() - 1;
  --shift_;
  size_regions();
  for (const Slot& old_slot : old) {
    if (old_slot.generation() != generation_) continue;
    uint64_t i = slot(old_slot.key);
    while (slots_[i].generation() == generation_) i = (i + 1) & mask_;
    slots_[i] = old_slot;
  }
}

void IdMap::clear() {
  if (size_ == 0) return;
  if (!dense_.empty()) {
    // The batch's entries fall below the next floor's headroom: absent, unwritten
    // (dense_room refills the map when int32 runs out).
    floor_ += size_ + headroom_;
  } else {
    // A new generation empties every slot; only when it wraps are they
    // written (to generation 0, which is never current).
    if (++generation_ == 0) {
      std::fill(slots_.begin(), slots_.end(), Slot{0, 0});
      generation_ = 1;
    }
  }
  inserted_.clear();
  size_ = 0;
}

}  // namespace glt::cpu
