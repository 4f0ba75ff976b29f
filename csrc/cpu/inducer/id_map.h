// The inducer's id maps: global node ids to local ids, one map per node type.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "cpu/runtime/huge_pages.h"

namespace glt::cpu {

// The keys an IdMap inserted since its last clear, in order, in an int64
// tensor that grows by doubling and is not zeroed. keys_from hands out views
// of it, no copies; a clear leaves them as they are: the next keys go into
// the same tensor only where no view of it is left and its memory is still
// this process's own, else into a new one.
class KeyLog {
 public:
  // Room for n more keys at the end; they count as logged.
  int64_t* extend(int64_t n);
  void push_back(int64_t key) { *extend(1) = key; }
  int64_t size() const { return size_; }
  void clear();
  // Drops the keys past the first n.
  void truncate(int64_t n) { size_ = std::min(size_, n); }
  void reserve(int64_t n);
  // The keys from the first-th on, as a view of the log.
  at::Tensor view_from(int64_t first) const;

 private:
  at::Tensor buffer_;         // undefined until the first key
  const void* allocated_ = nullptr;  // the memory buffer_ was given
  bool may_be_held_ = false;  // cleared since the last write: views of it may live
  int64_t size_ = 0;
  int64_t last_capacity_ = 0;  // of the buffer a clear let go: the next one's size
};

// Maps global node ids to local ids, one id space per node type: a hash
// table, or, when the id range is known and small enough, an id-indexed
// array (one memory access per lookup, reset by moving the floor its
// entries count from: nothing written).
class IdMap {
 public:
  IdMap();
  // Switches to an id-indexed array for ids in [0, num_ids).
  void use_dense(int64_t num_ids);
  // Keys of the hash table are (group << bits) | id (disjoint sampling: a
  // group is a seed's subgraph) in `num_groups` groups: each group's keys
  // hash into a region of the table of its own (overflowing into the next),
  // so that keys that arrive group by group, as a disjoint hop's do, probe
  // a few cached lines. 0 bits: plain hashing.
  void group_keys(int bits, int64_t num_groups);
  // Local id of `key`; inserts it with the next local id if absent.
  int64_t insert(int64_t key, bool* inserted);
  // Inserts keys[0, n) in order: local[i] is the local id of keys[i]; the
  // keys new to the map get the next local ids in order of first
  // appearance. Checks the keys first (check_keys); many keys go in on many
  // threads in parallel, with the same result (a hash table taking room for
  // them a piece at a time, as insert_in_order does).
  void insert_all(const int64_t* keys, int64_t n, int64_t* local);
  // insert_all on this thread, of checked keys: called for consecutive
  // parts of a sequence, it inserts the whole sequence.
  void insert_in_order(const int64_t* keys, int64_t n, int64_t* local);
  // insert_in_order of a hash table's keys, with room for all n first.
  void insert_hashed_in_order(const int64_t* keys, int64_t n, int64_t* local);
  // Room for a hop of n keys about to be inserted a part at a time: for
  // grouped keys all of it (hashed_piece); other keys take room as they go
  // in, so that the table grows with the distinct keys, not with the draws.
  void room_for_hop(int64_t n) {
    if (group_bits_ > 0) reserve(size_ + n);
  }
  // Whether insert_all inserts n keys in parallel.
  bool inserts_in_parallel(int64_t n) const;
  // Raises a ValueError naming the first key the map cannot hold.
  void check_keys(const int64_t* keys, int64_t n) const;
  // Local id of `key`, or -1.
  int64_t find(int64_t key) const;
  // The keys of local ids [first, size()): a view of the log (KeyLog), no copy.
  at::Tensor keys_from(int64_t first) const;
  int64_t size() const { return size_; }
  void clear();
  void reserve(int64_t n);

 private:
  void grow();
  // Fibonacci hashing: the top `64 - shift` bits of key * 2^64 / phi.
  static uint64_t slot_of(int64_t key, int shift) {
    return (static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ULL) >> shift;
  }
  // The first slot `key` probes (defined here: every probe loop inlines it).
  uint64_t slot(int64_t key) const {
    if (group_bits_ == 0) return slot_of(key, shift_);
    const uint64_t group = static_cast<uint64_t>(key) >> group_bits_;
    const int64_t id = key & ((int64_t{1} << group_bits_) - 1);
    const uint64_t offset = region_bits_ ? slot_of(id, 64 - region_bits_) : 0;
    return ((group << region_bits_) + offset) & mask_;
  }
  // The region size of a group (grouped keys), from the table's size.
  void size_regions();
  // Keys a hash table takes room for at a time when it inserts n: `piece`,
  // but grouped keys all n at once. A table sized for a piece of grouped
  // keys gives each group a region too small for its keys, which then
  // overflow into the next groups' (a disjoint hop of 1 M keys drawn
  // elsewhere took 9 s on a fresh table in pieces, 50 ms at once; a sampled
  // disjoint batch's first hop 70x its time).
  int64_t hashed_piece(int64_t n, int64_t piece) const {
    return group_bits_ > 0 ? n : std::min(n, piece);
  }
  // insert_all on many threads (cpu/inducer/id_map_parallel.cpp): the
  // positions claim their ids through `claims`, an id-indexed map's or the
  // hash table's.
  template <typename Claims>
  void insert_all_parallel(const int64_t* keys, int64_t n, int64_t* local, Claims& claims);
  struct DenseClaims;
  struct HashedClaims;
  // The hash table's slot of `key`, found or taken for it by position i
  // (a claim -1 - i, the lowest position's kept) while other threads do the
  // same; the table has room for every key. `claim` says what the claim
  // did (id_map_parallel.cpp: kNotClaimed, kTookEmpty, or the position it
  // took the claim from).
  uint64_t claim_slot(int64_t key, int64_t i, int64_t* claim);
  // A hash table slot: a key and its local id side by side, so that a probe
  // reads one cache line, and the generation (clear()) that wrote it: a slot
  // of an older generation is empty, so clearing the table writes nothing.
  // The id and the generation share one word, which claim_slot updates
  // atomically.
  struct Slot {
    int64_t key;
    uint64_t meta;  // the local id (int32) in the low half, the generation in the high
    static uint64_t pack(int64_t val, uint32_t generation) {
      return static_cast<uint32_t>(static_cast<int32_t>(val)) | uint64_t{generation} << 32;
    }
    static int32_t val_of(uint64_t meta) {
      return static_cast<int32_t>(static_cast<uint32_t>(meta));
    }
    static uint32_t generation_of(uint64_t meta) { return static_cast<uint32_t>(meta >> 32); }
    int32_t val() const { return val_of(meta); }
    uint32_t generation() const { return generation_of(meta); }
  };
  // Room in an id-indexed map for n more local ids and `claims` claims of a
  // parallel insert (rebase_dense where floor_ or headroom_ leaves too little).
  void dense_room(int64_t n, int64_t claims);
  // Moves an id-indexed map's entries of this batch down to the lowest floor
  // (room for n more) and empties every other entry.
  void rebase_dense(int64_t n);
  int64_t lowest_floor() const;
  // Both maps on huge pages (cpu/runtime/huge_pages.h): they are read at
  // random.
  template <typename T>
  using RandomReadArray = std::vector<T, HugePageAllocator<T>>;
  RandomReadArray<Slot> slots_;
  uint32_t generation_ = 1;  // slots of any other generation are empty
  uint64_t mask_;
  int shift_;
  int group_bits_ = 0;      // grouped keys: the id bits (0: plain hashing)
  int64_t num_groups_ = 1;  // grouped keys: how many groups
  int region_bits_ = 0;     // grouped keys: log2 of a group's region
  int64_t size_;
  // id -> floor_ + its local id. An entry below floor_ - headroom_ is absent
  // (an earlier batch's or never set); [floor_ - headroom_, floor_) holds the
  // claims of a parallel insert (floor_ - 1 - i by the first position i that
  // holds the id). A clear moves floor_ past the batch's entries and writes
  // nothing; only when int32 runs out is the array refilled.
  RandomReadArray<int32_t> dense_;
  int64_t floor_ = 0;
  int64_t headroom_;
  KeyLog inserted_;  // key of each local id, since the last clear
};

}  // namespace glt::cpu
