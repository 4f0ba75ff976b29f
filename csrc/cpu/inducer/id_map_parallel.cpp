// IdMap::insert_all: the keys of a hop inserted by many threads at once, with
// the result of a sequential insert (cpu/inducer/id_map.h).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "checks.h"
#include "cpu/inducer/id_map.h"
#include "cpu/runtime/parallel.h"

namespace glt::cpu {
namespace {

// Keys per chunk of a parallel insert; chunks, not threads, fix the order in
// which new ids are handed out. Small enough that a hop of 150 k draws (a
// products-size batch's second) gives 16 threads 37 chunks to share.
constexpr int64_t kInsertChunk = 4096;
// A parallel insert's per-thread counters per cache line.
constexpr int64_t kCountsPerLine = 64 / sizeof(int64_t);
// What an insert needs to run in parallel: it takes three passes (two of
// them random reads of the map) where one thread takes one, about 2.3x the
// work, and each pass wakes the threads. At 2 threads one pass, overlapped
// with the draws, is as fast (measured on an id-indexed map, products-size
// batches: 88-93 batches/s either way); from how many threads the parallel
// one is faster, the machine says: GLT_PARALLEL_INSERT_THREADS (read once)
// moves the default, for either kind of map.
constexpr int64_t kMinParallelPositions = 32768;
constexpr int kDefaultParallelInsertThreads = 4;
// Keys a hash table takes room for at a time in a parallel insert, as the
// ordered insert does (id_map.cpp): the table grows with the distinct keys,
// not with the draws. Larger than the ordered insert's pieces: each piece
// wakes the threads three times, and needs chunks enough for 16 of them.
constexpr int64_t kParallelHashedPiece = int64_t{1} << 18;

int parallel_insert_threads() {
  static const int threads = [] {
    const char* value = std::getenv("GLT_PARALLEL_INSERT_THREADS");
    const int parsed = value ? std::atoi(value) : 0;
    return parsed > 0 ? parsed : kDefaultParallelInsertThreads;
  }();
  return threads;
}
constexpr int64_t kPrefetchAhead = 16;
constexpr int kSpinsBeforeYield = 64;
// A prefetch the compiler keeps: GCC drops the __builtin_prefetch of a
// hash claim's home slot, and the claims then wait on every slot (1.65x the
// parallel insert's work at 1 thread, measured).
inline void prefetch_kept(const void* at) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(at)));
#else
  __builtin_prefetch(at, 1);
#endif
}

}  // namespace

bool IdMap::inserts_in_parallel(int64_t n) const {
  return kernel_threads() >= parallel_insert_threads() && n >= kMinParallelPositions;
}

// What a position's claim did (Claims::claim): nothing (its id is known or
// an earlier position holds it), took an empty entry, or else took the
// claim of the later position it returns.
constexpr int64_t kNotClaimed = -2;
constexpr int64_t kTookEmpty = -1;

// A sequential insert in parallel, with the same result: (1) every
// position i of an id not in the map claims it with -1 - i, and the map keeps
// the largest claim, the first position's (an atomic max; a known id, >= 0,
// is above every claim); each chunk of positions counts the claims it took,
// and each thread the claims it took from later positions, by their chunk
// (in a row of its own: a hub id's claim changes hands many times, and
// counters the threads shared would pass their cache lines back and forth);
// a chunk holds what it took less what was taken from it; (2) claimants
// take consecutive local ids, chunk by chunk in order, so ids follow first
// appearance: each position reads what its id holds, and a claimant writes
// its local id there (the line it just read); any other position reads a
// local id, or a claimant that has not written yet; (3) the later positions
// of a new id that read its claimant read the id from it.
// `claims` says where an id's claim lies: claim(i) makes position i's,
// held(i) reads what its id holds, assign(i, v) gives its id the local id v
// (each atomically: a claimant's write meets other positions' reads).
template <typename Claims>
void IdMap::insert_all_parallel(const int64_t* keys, int64_t n, int64_t* local, Claims& claims) {
  TORCH_CHECK_VALUE(n < INT32_MAX && size_ + n < INT32_MAX, "too many nodes in one batch");
  const int64_t num_chunks = (n + kInsertChunk - 1) / kInsertChunk;
  const int64_t row = (num_chunks + kCountsPerLine - 1) / kCountsPerLine * kCountsPerLine;
  std::vector<int64_t> taken(num_chunks);
  std::vector<int64_t> lost(kernel_threads() * row, 0);  // [thread][chunk]
  auto for_chunks = [&](auto&& body) {
    glt::cpu::parallel_for_workers(0, num_chunks, 1, [&](int64_t first, int64_t last,
                                                         int64_t worker) {
      for (int64_t ch = first; ch < last; ++ch) {
        body(ch, ch * kInsertChunk, std::min(n, (ch + 1) * kInsertChunk), worker);
      }
    });
  };
  for_chunks([&](int64_t ch, int64_t lo, int64_t hi, int64_t worker) {
    int64_t* lost_by_chunk = lost.data() + worker * row;
    int64_t took = 0;
    for (int64_t i = lo; i < hi; ++i) {
      if (i + kPrefetchAhead < hi) claims.prefetch(i + kPrefetchAhead);
      const int64_t claim = claims.claim(i);
      if (claim == kNotClaimed) continue;
      ++took;
      if (claim != kTookEmpty) ++lost_by_chunk[claim / kInsertChunk];
    }
    taken[ch] = took;
  });
  std::vector<int64_t> ranks(num_chunks + 1, 0);
  for (int64_t ch = 0; ch < num_chunks; ++ch) {
    int64_t held = taken[ch];
    for (size_t at = ch; at < lost.size(); at += row) held -= lost[at];
    ranks[ch + 1] = ranks[ch] + held;
  }
  const int64_t num_fresh = ranks[num_chunks];
  int64_t* fresh_keys = inserted_.extend(num_fresh);
  const int64_t base = size_;
  for_chunks([&](int64_t ch, int64_t lo, int64_t hi, int64_t) {
    int64_t rank = ranks[ch];
    for (int64_t i = lo; i < hi; ++i) {
      if (i + kPrefetchAhead < hi) claims.prefetch_held(i + kPrefetchAhead);
      local[i] = claims.held(i);
      if (local[i] != -1 - i) continue;
      local[i] = base + rank;
      claims.assign(i, base + rank);
      fresh_keys[rank++] = keys[i];
    }
  });
  for_chunks([&](int64_t, int64_t lo, int64_t hi, int64_t) {
    for (int64_t i = lo; i < hi; ++i) {
      if (local[i] < 0) local[i] = local[-1 - local[i]];
    }
  });
  size_ += num_fresh;
}

// The claims of an id-indexed map: each id's entry, position i's claim
// floor - 1 - i (at least first_claim, the lowest of this insert's claims).
struct IdMap::DenseClaims {
  int32_t* map;
  const int64_t* keys;
  int64_t floor;
  int64_t first_claim;

  void prefetch(int64_t i) const { __builtin_prefetch(&map[keys[i]], 1); }
  void prefetch_held(int64_t i) const { __builtin_prefetch(&map[keys[i]], 1); }
  int64_t claim(int64_t i) const {
    // The GCC/Clang atomic builtins, not C++20's std::atomic_ref: the
    // extension builds as C++17 against a torch before 2.13.
    int32_t* slot = &map[keys[i]];
    const int32_t mine = static_cast<int32_t>(floor - 1 - i);
    int32_t held = __atomic_load_n(slot, __ATOMIC_RELAXED);
    while (held < mine) {
      if (__atomic_compare_exchange_n(slot, &held, mine, /*weak=*/true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
        return held < first_claim ? kTookEmpty : floor - 1 - held;
      }
    }
    return kNotClaimed;
  }
  // The local id, or -1 - j for the claim of position j.
  int64_t held(int64_t i) const { return __atomic_load_n(&map[keys[i]], __ATOMIC_RELAXED) - floor; }
  void assign(int64_t i, int64_t v) const {
    __atomic_store_n(&map[keys[i]], static_cast<int32_t>(floor + v), __ATOMIC_RELAXED);
  }
};

// The claims of the hash table: each key's slot, found or taken by
// claim_slot, and kept per position.
struct IdMap::HashedClaims {
  IdMap* ids;
  const int64_t* keys;
  std::unique_ptr<uint64_t[]> slot;  // of each position

  Slot& entry(int64_t i) const { return ids->slots_[slot[i]]; }
  void prefetch(int64_t i) const { prefetch_kept(&ids->slots_[ids->slot(keys[i])]); }
  void prefetch_held(int64_t i) const { __builtin_prefetch(&entry(i), 1); }
  int64_t claim(int64_t i) {
    int64_t claim;
    slot[i] = ids->claim_slot(keys[i], i, &claim);
    return claim;
  }
  int64_t held(int64_t i) const {
    return Slot::val_of(__atomic_load_n(&entry(i).meta, __ATOMIC_RELAXED));
  }
  void assign(int64_t i, int64_t v) const {
    __atomic_store_n(&entry(i).meta, Slot::pack(v, ids->generation_), __ATOMIC_RELAXED);
  }
};

uint64_t IdMap::claim_slot(int64_t key, int64_t i, int64_t* claim) {
  // kTaking: a slot a thread has taken and not yet written its key into.
  constexpr int32_t kTaking = INT32_MIN;  // below every claim -1 - i (i < INT32_MAX)
  const int32_t mine = static_cast<int32_t>(-1 - i);
  uint64_t j = slot(key);
  while (true) {
    Slot& entry = slots_[j];
    uint64_t meta = __atomic_load_n(&entry.meta, __ATOMIC_ACQUIRE);
    if (Slot::generation_of(meta) != generation_) {  // empty: take it for this key
      if (!__atomic_compare_exchange_n(&entry.meta, &meta, Slot::pack(kTaking, generation_),
                                       /*weak=*/false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        continue;  // taken meanwhile: look at it again
      }
      __atomic_store_n(&entry.key, key, __ATOMIC_RELAXED);
      __atomic_store_n(&entry.meta, Slot::pack(mine, generation_), __ATOMIC_RELEASE);
      *claim = kTookEmpty;
      return j;
    }
    // Its key comes in the taker's next store (which may wait for a core).
    for (int spins = 0; Slot::val_of(meta) == kTaking; ++spins) {
      if (spins >= kSpinsBeforeYield) std::this_thread::yield();
      meta = __atomic_load_n(&entry.meta, __ATOMIC_ACQUIRE);
    }
    if (__atomic_load_n(&entry.key, __ATOMIC_RELAXED) == key) {
      // This key's slot: keep the largest claim (a known id, >= 0, above all).
      *claim = kNotClaimed;
      while (Slot::val_of(meta) < mine) {
        if (__atomic_compare_exchange_n(&entry.meta, &meta, Slot::pack(mine, generation_),
                                        /*weak=*/true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
          *claim = -1 - static_cast<int64_t>(Slot::val_of(meta));
          break;
        }
      }
      return j;
    }
    j = (j + 1) & mask_;
  }
}

void IdMap::insert_all(const int64_t* keys, int64_t n, int64_t* local) {
  // Checked before anything is written: a claim left behind by a parallel
  // insert would outlive reset().
  check_keys(keys, n);
  if (!inserts_in_parallel(n)) {
    insert_in_order(keys, n, local);
  } else if (!dense_.empty()) {
    dense_room(n, n);
    DenseClaims claims{dense_.data(), keys, floor_, floor_ - n};
    insert_all_parallel(keys, n, local, claims);
  } else {
    const int64_t piece = hashed_piece(n, kParallelHashedPiece);
    // Each piece's slots, not zeroed.
    HashedClaims claims{this, keys, std::unique_ptr<uint64_t[]>(new uint64_t[piece])};
    for (int64_t first = 0; first < n; first += piece) {
      const int64_t count = std::min(piece, n - first);
      reserve(size_ + count);  // no slot moves while the threads claim them
      claims.keys = keys + first;
      insert_all_parallel(keys + first, count, local + first, claims);
    }
  }
}

}  // namespace glt::cpu
