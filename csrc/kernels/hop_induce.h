// A hop drawn and added to the inducer's tables with the host told once:
// the passes of the device inducer's sample_induce_next (and of init_nodes).
//
// A seed gets at most `fanout` neighbors, so every buffer of a hop is sized
// by that bound ahead of the draws: the draws land at their seeds' offsets (a
// prefix sum on the device), the inserts skip the entries past the true total
// (read on the device), and the new nodes are numbered from the type's size
// as the device knows it. The true sizes and what the checks found stay on
// the device, in each request's report, until the caller reads every report
// of the hop at once, its one host sync. Only a hop of all neighbors (fanout
// -1) has no bound ahead and reads its total first.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "kernels/device.h"
#include "kernels/id_table.h"
#include "kernels/sample_neighbors.h"

namespace glt {
namespace kernels {

// The slots of a request's report (int64): its sizes, then the first index
// at which each check failed (kNone where none did).
enum HopReportSlot : int64_t {
  kTotal = 0,        // neighbors drawn
  kFresh = 1,        // nodes new to the neighbors' type
  kBadSeed = 2,      // a seed outside the topology's rows
  kUnseenSeed = 3,   // a seed the inducer has not met
  kBadRow = 4,       // a seed whose row's entries lie outside indices
  kBadNeighbor = 5,  // a draw of a neighbor id outside the node ids
  kReportSize = 6,
};
constexpr int64_t kNone = INT64_MAX;

// A new report: sizes 0, no failure.
inline at::Tensor new_report(const at::TensorOptions& options) {
  auto report = at::full({kReportSize}, kNone, options);
  report.narrow(0, 0, 2).zero_();
  return report;
}

// One request's draws, in buffers of the hop's bound (`eids` empty without
// edge ids): neighbors, the local index of each one's seed (`rows`) and its
// own (`cols`), and the nodes new to its type in order of first appearance.
struct BoundedHop {
  at::Tensor counts, offsets;  // neighbors per seed; where each seed's start (n + 1)
  at::Tensor nbrs, eids, rows, cols, fresh;
  at::Tensor positions;  // the indices entry of each draw
  at::Tensor report;
};

// Where a request's seeds are: seed i is ids[first + i] for first + i <
// end, `first` and `end` read on the device where pointers to them are
// given (a frontier: the nodes a type's table numbered in the hop before),
// else from 0 and every seed of the launch (`bound` of them); its local id
// is local[i], or first + i where `local` is null (a type's nodes are
// numbered in the order of its node list).
struct SeedRange {
  const int64_t* ids;
  const int64_t* local = nullptr;
  const int64_t* first = nullptr;
  const int64_t* end = nullptr;
  int64_t bound = 0;

  GLT_HOST_DEVICE int64_t start() const { return first ? *first : 0; }
  GLT_HOST_DEVICE bool holds(int64_t i) const { return end == nullptr || start() + i < *end; }
  GLT_HOST_DEVICE int64_t id(int64_t i) const { return ids[start() + i]; }
  GLT_HOST_DEVICE int64_t local_id(int64_t i) const { return local ? local[i] : start() + i; }
};

// A request's seeds held in a tensor, with their local ids.
inline SeedRange seed_range(const at::Tensor& seeds, const at::Tensor& seed_local) {
  SeedRange range{seeds.data_ptr<int64_t>()};
  range.local = seed_local.data_ptr<int64_t>();
  range.bound = seeds.numel();
  return range;
}

// The counts and offsets of a request's draws: seeds outside the rows,
// unseen by the inducer (local id -1) or with a row outside indices get
// none and are reported.
template <typename index_t, typename Backend>
void count_bounded(const Backend& backend, const CsrView<index_t>& g, int64_t num_rows,
                   int64_t num_entries, const SeedRange& seeds, int64_t k, bool replace,
                   BoundedHop& hop) {
  const int64_t n = seeds.bound;
  const auto options = hop.report.options();
  hop.counts = at::empty({n}, options);
  hop.offsets = at::empty({n + 1}, options);
  int64_t* cnt = hop.counts.data_ptr<int64_t>();
  int64_t* off = hop.offsets.data_ptr<int64_t>();
  int64_t* report = hop.report.data_ptr<int64_t>();
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
    cnt[i] = 0;
    if (i == 0) off[0] = 0;
    if (!seeds.holds(i)) return;
    const int64_t s = seeds.id(i);
    if (s < 0 || s >= num_rows) {
      device::atomic_min(&report[kBadSeed], i);
      return;
    }
    if (seeds.local_id(i) < 0) {
      device::atomic_min(&report[kUnseenSeed], i);
      return;
    }
    const int64_t begin = g.indptr[s], end = g.indptr[s + 1];
    if (begin < 0 || begin > end || end > num_entries) {
      device::atomic_min(&report[kBadRow], i);
      return;
    }
    cnt[i] = sample_count(g, begin, end, k, replace);
  });
  if (n > 0) {
    at::Tensor sums = hop.offsets.narrow(0, 1, n);
    at::cumsum_out(sums, hop.counts, 0);
  }
  if (n == 0) hop.offsets.zero_();
}

// report[kTotal] = the request's draws (its last offset).
template <typename Backend>
void record_total(const Backend& backend, BoundedHop& hop) {
  const int64_t* last = hop.offsets.data_ptr<int64_t>() + hop.counts.numel();
  int64_t* report = hop.report.data_ptr<int64_t>();
  backend.for_each(1, [=] GLT_HOST_DEVICE(int64_t) { report[kTotal] = *last; });
}

// Where a request's draws go besides its own buffers: each draw's seed's
// local id into rows[at + j] and its edge id into eids[at + j] (`at` read on
// the device; null: 0), in buffers of the batch rather than the request's
// own where they are given; and the Philox key: keys[*key_index] where
// given (a key the host did not know when it launched), else `key`.
struct DrawTargets {
  int64_t* rows = nullptr;
  int64_t* eids = nullptr;
  const int64_t* at = nullptr;
  uint64_t key = 0;
  const int64_t* keys = nullptr;
  const int64_t* key_index = nullptr;
  int64_t num_ids = INT64_MAX;  // neighbor ids at or past it are reported

  GLT_HOST_DEVICE int64_t offset() const { return at ? *at : 0; }
  GLT_HOST_DEVICE uint64_t rng_key() const {
    return keys ? static_cast<uint64_t>(keys[*key_index]) : key;
  }
};

// Draws every seed's neighbors into buffers of `bound` entries, at its
// offset, with the local id of its seed beside each (seed i's draws come
// from stream i of the key, as in the sample_neighbors op). A neighbor id
// outside [0, num_ids) is reported and left out of the inducer's inserts.
// Two passes: a thread a seed draws its entries' positions (and writes its
// local id beside each), then a thread a draw reads its entry's neighbor
// and edge id: the random reads of indices, many per seed, are each a
// thread's one load, all in flight at once, rather than one after another
// in their seed's thread.
template <typename index_t, typename Backend>
void draw_bounded(const Backend& backend, const CsrView<index_t>& g, const SeedRange& seeds,
                  int64_t k, bool replace, int64_t bound, DrawTargets out, BoundedHop& hop) {
  const auto options = hop.report.options();
  hop.nbrs = at::empty({bound}, options);
  if (out.rows == nullptr) {
    hop.rows = at::empty({bound}, options);
    hop.eids = at::empty({g.edge_ids ? bound : 0}, options);
    out.rows = hop.rows.data_ptr<int64_t>();
    out.eids = g.edge_ids ? hop.eids.data_ptr<int64_t>() : nullptr;
  }
  hop.positions = at::empty({bound}, options);
  const bool keyed = g.weights && !replace && k >= 0;
  auto keys = at::empty({keyed ? bound : 0}, options.dtype(at::kDouble));
  const int64_t* cnt = hop.counts.data_ptr<int64_t>();
  const int64_t* off = hop.offsets.data_ptr<int64_t>();
  const int64_t* total = off + hop.counts.numel();
  int64_t* nbr = hop.nbrs.data_ptr<int64_t>();
  int64_t* positions = hop.positions.data_ptr<int64_t>();
  double* key_scratch = keyed ? keys.data_ptr<double>() : nullptr;
  int64_t* report = hop.report.data_ptr<int64_t>();
  backend.for_each(seeds.bound, [=] GLT_HOST_DEVICE(int64_t i) {
    const int64_t m = cnt[i];
    if (m == 0) return;
    const int64_t o = off[i], s = seeds.id(i), row = seeds.local_id(i), at = out.offset();
    device::Philox rng(out.rng_key(), static_cast<uint64_t>(i));
    sample_positions(g, g.indptr[s], g.indptr[s + 1], k, m, replace, rng, positions + o,
                     key_scratch ? key_scratch + o : nullptr);
    for (int64_t j = o; j < o + m; ++j) out.rows[at + j] = row;
  });
  backend.for_each(bound, [=] GLT_HOST_DEVICE(int64_t j) {
    if (j >= *total) return;
    const int64_t p = positions[j];
    int64_t v = static_cast<int64_t>(g.indices[p]);
    if (v < 0 || v >= out.num_ids) {
      device::atomic_min(&report[kBadNeighbor], j);  // its entry: indices[positions[j]]
      v = -1;                                         // left out of the inserts
    }
    nbr[j] = v;
    if (out.eids) out.eids[out.offset() + j] = g.edge_ids[p];
  });
}

}  // namespace kernels
}  // namespace glt
