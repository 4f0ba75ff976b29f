// Deduplication and relabelling of sampled nodes into local id spaces.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <memory>
#include <string>

#include "checks.h"
#include "cpu/inducer/inducer.h"
#include "cpu/runtime/parallel.h"

namespace glt::cpu {
namespace {

constexpr int kInitialBits = 10;
// An absent id in a dense map: below every claim -1 - i (i < INT32_MAX) and
// every local id.
constexpr int32_t kAbsent = INT32_MIN;
// Keys per chunk of a parallel dense insert; chunks, not threads, fix the
// order in which new ids are handed out.
constexpr int64_t kInsertChunk = 16384;
// What a dense insert needs to run in parallel: it takes five passes (two of
// them random reads of the map) where one thread takes one, and each pass
// wakes the threads. At 2 threads one pass, overlapped with the draws, is
// faster (measured: 1.7x); from how many threads the parallel one is, the
// machine says: GLT_PARALLEL_INSERT_THREADS (read once) moves the default.
constexpr int64_t kMinParallelPositions = 32768;
constexpr int kDefaultParallelInsertThreads = 4;

int parallel_insert_threads() {
  static const int threads = [] {
    const char* value = std::getenv("GLT_PARALLEL_INSERT_THREADS");
    const int parsed = value ? std::atoi(value) : 0;
    return parsed > 0 ? parsed : kDefaultParallelInsertThreads;
  }();
  return threads;
}
constexpr int64_t kPrefetchAhead = 16;
// The one-pass insert reads nothing else: it can keep more misses in flight.
constexpr int64_t kInsertPrefetchAhead = 32;
// A dense map with more than one id in this many in use is reset by a fill.
constexpr int64_t kResetByFill = 16;

inline int floor_log2(uint64_t x) { return x ? 63 - __builtin_clzll(x) : 0; }

}  // namespace

int64_t* KeyLog::extend(int64_t n) {
  reserve(size_ + n);
  int64_t* end = data_.get() + size_;
  size_ += n;
  return end;
}

void KeyLog::reserve(int64_t n) {
  if (n <= capacity_) return;
  const int64_t capacity = std::max<int64_t>(n, 2 * capacity_);
  std::unique_ptr<int64_t[]> data(new int64_t[capacity]);  // not zeroed
  std::copy(data_.get(), data_.get() + size_, data.get());
  data_ = std::move(data);
  capacity_ = capacity;
}

IdMap::IdMap()
    : slots_(1 << kInitialBits, Slot{0, 0, 0}),
      mask_((1 << kInitialBits) - 1),
      shift_(64 - kInitialBits),
      size_(0) {}

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
}

int64_t IdMap::insert(int64_t key, bool* inserted) {
  if (!dense_.empty()) {
    TORCH_CHECK_VALUE(key < static_cast<int64_t>(dense_.size()), "node id ", key,
                      " is out of range for ", dense_.size(), " nodes");
    int32_t& slot = dense_[key];
    *inserted = slot < 0;
    if (*inserted) {
      TORCH_CHECK_VALUE(size_ < INT32_MAX, "too many nodes in one batch");
      slot = static_cast<int32_t>(size_++);
      inserted_.push_back(key);
    }
    return slot;
  }
  if (2 * (size_ + 1) > static_cast<int64_t>(slots_.size())) grow();
  TORCH_CHECK_VALUE(size_ < INT32_MAX, "too many nodes in one batch");
  uint64_t i = slot(key);
  while (true) {
    Slot& slot = slots_[i];
    if (slot.generation != generation_) {
      slot = Slot{key, static_cast<int32_t>(size_), generation_};
      inserted_.push_back(key);
      *inserted = true;
      return size_++;
    }
    if (slot.key == key) {
      *inserted = false;
      return slot.val;
    }
    i = (i + 1) & mask_;
  }
}

int64_t IdMap::find(int64_t key) const {
  if (!dense_.empty()) {
    if (key >= static_cast<int64_t>(dense_.size())) return -1;
    const int32_t local = dense_[key];
    return local < 0 ? -1 : local;
  }
  uint64_t i = slot(key);
  while (true) {
    const Slot& slot = slots_[i];
    if (slot.generation != generation_) return -1;
    if (slot.key == key) return slot.val;
    i = (i + 1) & mask_;
  }
}

at::Tensor IdMap::keys_from(int64_t first) const {
  const int64_t n = size_ - first;
  auto out = at::empty({n}, at::kLong);
  const int64_t* src = inserted_.data() + first;
  int64_t* dst = out.data_ptr<int64_t>();
  glt::cpu::parallel_for(0, n, 1 << 16, [&](int64_t begin, int64_t end) {
    std::copy(src + begin, src + end, dst + begin);
  });
  return out;
}

void IdMap::check_keys(const int64_t* keys, int64_t n) const {
  // Ids are non-negative (a hash table's keys too: a negative one is an error).
  const uint64_t bound = dense_.empty() ? INT64_MAX : dense_.size();
  std::atomic<bool> outside{false};
  glt::cpu::parallel_for(0, n, kInsertChunk, [&](int64_t begin, int64_t end) {
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

bool IdMap::inserts_in_parallel(int64_t n) const {
  return !dense_.empty() && kernel_threads() >= parallel_insert_threads() &&
         n >= kMinParallelPositions;
}

void IdMap::insert_all(const int64_t* keys, int64_t n, int64_t* local) {
  // Checked before anything is written: a claim left behind by a parallel
  // insert would outlive reset().
  check_keys(keys, n);
  if (inserts_in_parallel(n)) {
    insert_all_parallel(keys, n, local);
  } else {
    insert_in_order(keys, n, local);
  }
}

void IdMap::insert_in_order(const int64_t* keys, int64_t n, int64_t* local) {
  TORCH_CHECK_VALUE(size_ + n < INT32_MAX, "too many nodes in one batch");
  if (dense_.empty()) {
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
        if (entry.generation != generation) {
          entry = Slot{key, static_cast<int32_t>(size_ + num_fresh), generation};
          local[i] = size_ + num_fresh;
          fresh_keys[num_fresh++] = key;
          break;
        }
        if (entry.key == key) {
          local[i] = entry.val;
          break;
        }
      }
    }
    size_ += num_fresh;
    inserted_.truncate(size_);
    return;
  }
  // One pass: a new id takes the next local id where it first appears.
  int32_t* map = dense_.data();
  int64_t* fresh_keys = inserted_.extend(n);  // room for all; the unused tail is dropped
  int64_t num_fresh = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i + kInsertPrefetchAhead < n) __builtin_prefetch(&map[keys[i + kInsertPrefetchAhead]], 1);
    int32_t& slot = map[keys[i]];
    if (slot == kAbsent) {
      slot = static_cast<int32_t>(size_ + num_fresh);
      fresh_keys[num_fresh++] = keys[i];
    }
    local[i] = slot;
  }
  size_ += num_fresh;
  inserted_.truncate(size_);
}

// A sequential insert in parallel, with the same result: (1) every
// position i of an id not in the map claims it with -1 - i, and the map keeps
// the largest claim, the first position's (an atomic max; a known id, >= 0,
// is above every claim); then each position reads what its id holds: its
// local id, or its claimant; (2) each chunk of positions counts its claims;
// (3) claimants take consecutive local ids, chunk by chunk in order, so ids
// follow first appearance; (4) the later positions of a new id read it from
// their claimant.
void IdMap::insert_all_parallel(const int64_t* keys, int64_t n, int64_t* local) {
  TORCH_CHECK_VALUE(n < INT32_MAX && size_ + n < INT32_MAX, "too many nodes in one batch");
  int32_t* map = dense_.data();
  glt::cpu::parallel_for(0, n, kInsertChunk, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (i + kPrefetchAhead < end) __builtin_prefetch(&map[keys[i + kPrefetchAhead]], 1);
      // The GCC/Clang atomic builtins, not C++20's std::atomic_ref: the
      // extension builds as C++17 against a torch before 2.13.
      int32_t* slot = &map[keys[i]];
      const int32_t mine = static_cast<int32_t>(-1 - i);
      int32_t held = __atomic_load_n(slot, __ATOMIC_RELAXED);
      while (held < mine && !__atomic_compare_exchange_n(slot, &held, mine, /*weak=*/true,
                                                         __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      }
    }
  });
  glt::cpu::parallel_for(0, n, kInsertChunk, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (i + kPrefetchAhead < end) __builtin_prefetch(&map[keys[i + kPrefetchAhead]]);
      local[i] = map[keys[i]];
    }
  });

  const int64_t num_chunks = (n + kInsertChunk - 1) / kInsertChunk;
  auto for_chunks = [&](auto&& body) {
    glt::cpu::parallel_for(0, num_chunks, 1, [&](int64_t first, int64_t last) {
      for (int64_t ch = first; ch < last; ++ch) {
        body(ch, ch * kInsertChunk, std::min(n, (ch + 1) * kInsertChunk));
      }
    });
  };
  std::vector<int64_t> claims(num_chunks + 1, 0);
  for_chunks([&](int64_t ch, int64_t lo, int64_t hi) {
    int64_t count = 0;
    for (int64_t i = lo; i < hi; ++i) count += local[i] == -1 - i;
    claims[ch + 1] = count;
  });
  for (int64_t ch = 0; ch < num_chunks; ++ch) claims[ch + 1] += claims[ch];
  const int64_t num_fresh = claims[num_chunks];
  int64_t* fresh_keys = inserted_.extend(num_fresh);
  const int64_t base = size_;
  for_chunks([&](int64_t ch, int64_t lo, int64_t hi) {
    int64_t rank = claims[ch];
    for (int64_t i = lo; i < hi; ++i) {
      if (local[i] != -1 - i) continue;
      local[i] = base + rank;
      map[keys[i]] = static_cast<int32_t>(base + rank);
      fresh_keys[rank++] = keys[i];
    }
  });
  for_chunks([&](int64_t, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      if (local[i] < 0) local[i] = local[-1 - local[i]];
    }
  });
  size_ += num_fresh;
}

void IdMap::reserve(int64_t n) {
  inserted_.reserve(n);
  if (!dense_.empty()) return;
  while (2 * n > static_cast<int64_t>(slots_.size())) grow();
}

void IdMap::grow() {
  std::vector<Slot> old(slots_.size() * 2, Slot{0, 0, 0});
  old.swap(slots_);
  mask_ = slots_.size() - 1;
  --shift_;
  size_regions();
  for (const Slot& old_slot : old) {
    if (old_slot.generation != generation_) continue;
    uint64_t i = slot(old_slot.key);
    while (slots_[i].generation == generation_) i = (i + 1) & mask_;
    slots_[i] = old_slot;
  }
}

void IdMap::clear() {
  if (size_ == 0) return;
  if (!dense_.empty()) {
    const int64_t* keys = inserted_.data();
    int32_t* map = dense_.data();
    const int64_t num_ids = static_cast<int64_t>(dense_.size());
    if (size_ >= num_ids / kResetByFill) {
      // A random write costs a cache line: past one id in 16, refill it all.
      glt::cpu::parallel_for(0, num_ids, 1 << 18, [&](int64_t begin, int64_t end) {
        std::fill(map + begin, map + end, kAbsent);
      });
    } else {
      glt::cpu::parallel_for(0, size_, 16384, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) map[keys[i]] = kAbsent;
      });
    }
  } else {
    // A new generation empties every slot; only when it wraps are they
    // written (to generation 0, which is never current).
    if (++generation_ == 0) {
      std::fill(slots_.begin(), slots_.end(), Slot{0, 0, 0});
      generation_ = 1;
    }
  }
  inserted_.clear();
  size_ = 0;
}

Inducer::Inducer(int64_t num_node_types, const std::vector<int64_t>& num_nodes,
                 int64_t disjoint_bits)
    : disjoint_bits_(disjoint_bits) {
  TORCH_CHECK_VALUE(num_node_types >= 1, "an Inducer needs at least one node type, got ",
                    num_node_types);
  TORCH_CHECK_VALUE(disjoint_bits >= 0 && disjoint_bits <= 62,
                    "disjoint_bits must be in [0, 62], got ", disjoint_bits);
  TORCH_CHECK_VALUE(disjoint_bits == 0 || num_nodes.empty() ||
                        std::all_of(num_nodes.begin(), num_nodes.end(),
                                    [](int64_t n) { return n <= 0; }),
                    "disjoint keys need hash maps: give no num_nodes with disjoint_bits");
  TORCH_CHECK_VALUE(num_nodes.empty() || static_cast<int64_t>(num_nodes.size()) == num_node_types,
                    "num_nodes needs one entry per node type (", num_node_types, "), got ",
                    num_nodes.size());
  maps_.resize(num_node_types);
  added_.resize(num_node_types);
  for (size_t t = 0; t < num_nodes.size(); ++t) {
    if (num_nodes[t] > 0) maps_[t].use_dense(num_nodes[t]);
  }
}

void Inducer::check_type(int64_t t) const {
  TORCH_CHECK_VALUE(t >= 0 && t < num_node_types(), "node type index ", t, " out of range for ",
                    num_node_types(), " node types");
}

void Inducer::reset() {
  for (auto& m : maps_) m.clear();
  for (auto& a : added_) a = Added{};
}

std::vector<at::Tensor> Inducer::init_nodes(const std::vector<at::Tensor>& seeds) {
  TORCH_CHECK_VALUE(static_cast<int64_t>(seeds.size()) == num_node_types(),
                    "init_nodes expects one seed tensor per node type (", num_node_types(),
                    "), got ", seeds.size());
  reset();
  if (disjoint_bits_ > 0) {
    int64_t num_seeds = 0;
    for (const auto& s : seeds) num_seeds += s.numel();
    for (auto& m : maps_) m.group_keys(static_cast<int>(disjoint_bits_), num_seeds);
  }
  std::vector<at::Tensor> out;
  for (size_t t = 0; t < seeds.size(); ++t) {
    check_index(seeds[t], "seeds");
    const auto s = seeds[t].contiguous();
    check_range(s, INT64_MAX, "seeds");
    const int64_t* ptr = s.data_ptr<int64_t>();
    IdMap& map = maps_[t];
    map.reserve(s.numel());
    for (int64_t i = 0; i < s.numel(); ++i) {
      bool inserted;
      map.insert(ptr[i], &inserted);
    }
    out.push_back(map.keys_from(0));
    remember_added(t, out.back(), 0);
  }
  return out;
}

void Inducer::remember_added(int64_t t, const at::Tensor& nodes, int64_t first) {
  added_[t] = Added{nodes, nodes._version(), first};
}

int64_t Inducer::first_local_id_if_added(int64_t t, const at::Tensor& srcs) const {
  const Added& a = added_[t];
  return a.nodes.defined() && srcs.is_same(a.nodes) && srcs._version() == a.version ? a.first : -1;
}

at::Tensor Inducer::local_ids(int64_t node_type, const at::Tensor& ids) const {
  check_type(node_type);
  check_index(ids, "ids");
  const auto in = ids.contiguous();
  auto out = at::empty({in.numel()}, at::kLong);
  const IdMap& map = maps_[node_type];
  const int64_t* src = in.data_ptr<int64_t>();
  int64_t* dst = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < in.numel(); ++i) dst[i] = src[i] < 0 ? -1 : map.find(src[i]);
  return out;
}

std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>>
Inducer::induce_next(const std::vector<int64_t>& src_types, const std::vector<int64_t>& nbr_types,
                     const std::vector<at::Tensor>& srcs, const std::vector<at::Tensor>& nbrs,
                     const std::vector<at::Tensor>& nbr_nums,
                     const std::vector<at::Tensor>& row_outs,
                     const std::vector<at::Tensor>& col_outs) {
  const size_t num_etypes = srcs.size();
  TORCH_CHECK_VALUE(src_types.size() == num_etypes && nbr_types.size() == num_etypes &&
                        nbrs.size() == num_etypes && nbr_nums.size() == num_etypes,
                    "induce_next expects src_types, nbr_types, srcs, nbrs and "
                    "nbr_nums of one length");
  check_outputs(row_outs, num_etypes, "row_outs");
  check_outputs(col_outs, num_etypes, "col_outs");
  std::vector<int64_t> first_fresh(maps_.size());
  for (size_t t = 0; t < maps_.size(); ++t) first_fresh[t] = maps_[t].size();
  std::vector<at::Tensor> rows, cols;
  for (size_t e = 0; e < num_etypes; ++e) {
    check_type(src_types[e]);
    check_type(nbr_types[e]);
    check_index(srcs[e], "srcs");
    check_index(nbrs[e], "nbrs");
    check_index(nbr_nums[e], "nbr_nums");
    const auto src = srcs[e].contiguous(), nbr = nbrs[e].contiguous(),
               num = nbr_nums[e].contiguous();
    TORCH_CHECK_VALUE(src.numel() == num.numel(),
                      "srcs and nbr_nums differ in length: ", src.numel(), " vs ", num.numel());
    const int64_t* m = num.data_ptr<int64_t>();
    std::vector<int64_t> offsets(src.numel() + 1);
    offsets[0] = 0;
    bool negative = false;
    for (int64_t i = 0; i < src.numel(); ++i) {
      negative |= m[i] < 0;
      offsets[i + 1] = offsets[i] + m[i];
    }
    TORCH_CHECK_VALUE(!negative, "nbr_nums must be >= 0");
    TORCH_CHECK_VALUE(offsets.back() == nbr.numel(), "nbr_nums sums to ", offsets.back(),
                      " but nbrs holds ", nbr.numel(), " entries");

    const int64_t n = nbr.numel();
    // Checked before anything is written (row_outs against col_outs too).
    const at::Tensor row =
        row_outs.empty() ? at::empty({n}, at::kLong)
                         : checked_output(row_outs[e], n, at::kCPU, "row_outs", {src, nbr, num});
    const at::Tensor col =
        col_outs.empty()
            ? at::empty({n}, at::kLong)
            : checked_output(col_outs[e], n, at::kCPU, "col_outs", {src, nbr, num, row});
    write_rows(src_types[e], srcs[e], src, offsets.data(), row.data_ptr<int64_t>());
    maps_[nbr_types[e]].insert_all(nbr.data_ptr<int64_t>(), nbr.numel(), col.data_ptr<int64_t>());
    rows.push_back(row);
    cols.push_back(col);
  }
  return {take_added(first_fresh), rows, cols};
}

void Inducer::write_rows(int64_t t, const at::Tensor& srcs, const at::Tensor& src,
                         const int64_t* offsets, int64_t* r) const {
  const IdMap& src_map = maps_[t];
  const int64_t* s = src.data_ptr<int64_t>();
  // The seeds are most often the nodes their type added last hop, whose
  // local ids are consecutive: no lookups then.
  const int64_t first_local = first_local_id_if_added(t, srcs);
  std::atomic<int64_t> unseen{-1};
  glt::cpu::parallel_for(0, src.numel(), 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t local = first_local >= 0 ? first_local + i : src_map.find(s[i]);
      if (local < 0) unseen = i;
      std::fill(r + offsets[i], r + offsets[i + 1], local);
    }
  });
  TORCH_CHECK_VALUE(unseen < 0, "source node ", unseen < 0 ? 0 : s[unseen.load()],
                    " was not seen by the inducer before this hop");
}

std::vector<at::Tensor> Inducer::take_added(const std::vector<int64_t>& first_fresh) {
  std::vector<at::Tensor> nodes;
  for (size_t t = 0; t < maps_.size(); ++t) {
    nodes.push_back(maps_[t].keys_from(first_fresh[t]));
    remember_added(t, nodes.back(), first_fresh[t]);
  }
  return nodes;
}

}  // namespace glt::cpu
