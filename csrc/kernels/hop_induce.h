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
  kBadPart = 6,      // a seed whose partition book entry names no partition
  kReportSize = 7,
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
  at::Tensor slots;      // each draw's slot in the neighbors' table, claimed as drawn
  at::Tensor seed_parts, draw_parts;  // each seed's and draw's partition (partitioned draws)
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

// The Philox key a request takes where the host did not know it at launch
// (a whole batch): *key_index = *drawn, the requests with seeds before it;
// then *drawn counts it too if it has seeds.
struct KeyTake {
  int64_t* drawn = nullptr;
  int64_t* key_index = nullptr;
};

// The counts and offsets of a request's draws: seeds outside the rows,
// unseen by the inducer (local id -1) or with a row outside indices get
// none and are reported. `source` says where each seed draws from
// (SingleTopology, PartitionedTopologies); `take`, where given, is done by
// the first thread (the key is read by the draws, a later kernel).
template <typename Source, typename Backend>
void count_bounded(const Backend& backend, const Source& source, const SeedRange& seeds,
                   int64_t k, bool replace, BoundedHop& hop, KeyTake take = {}) {
  const int64_t n = seeds.bound;
  const auto options = hop.report.options();
  hop.counts = at::empty({n}, options);
  hop.offsets = at::empty({n + 1}, options);
  int64_t* cnt = hop.counts.data_ptr<int64_t>();
  int64_t* off = hop.offsets.data_ptr<int64_t>();
  int64_t* report = hop.report.data_ptr<int64_t>();
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
    cnt[i] = 0;
    if (i == 0) {
      off[0] = 0;
      if (take.key_index != nullptr) {
        *take.key_index = *take.drawn;
        if (seeds.holds(0)) ++*take.drawn;
      }
    }
    if (!seeds.holds(i)) return;
    const int64_t s = seeds.id(i), row = source.row(i, s);
    const auto& g = source.seed_graph(i);
    if (s < 0 || row < 0 || row >= g.num_rows) {
      device::atomic_min(&report[kBadSeed], i);
      return;
    }
    if (seeds.local_id(i) < 0) {
      device::atomic_min(&report[kUnseenSeed], i);
      return;
    }
    int64_t begin = g.indptr[row], end = g.indptr[row + 1];
    if (begin < 0 || begin > end || end > g.num_entries) {
      device::atomic_min(&report[kBadRow], i);
      return;
    }
    source.window(i, s, &begin, &end);
    const int64_t m = sample_count(g, begin, end, source.fanout(i, k), replace);
    if (k >= 0 && m > k) {  // a given row past the bound (HopPieces)
      device::atomic_min(&report[kBadRow], i);
      return;
    }
    cnt[i] = m;
  });
  if (n > 0) {
    at::Tensor sums = hop.offsets.narrow(0, 1, n);
    at::cumsum_out(sums, hop.counts, 0);
  }
  if (n == 0) hop.offsets.zero_();
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
  // Where given (slot != null), each draw's neighbor claims its slot in the
  // neighbors' table as it is read: the insert's first pass (SlotClaims).
  SlotClaims claims{};

  GLT_HOST_DEVICE int64_t offset() const { return at ? *at : 0; }
  // The key of partition `part` of `num_parts` (a request of one topology:
  // part 0 of 1); the host gives keys[k * num_parts + part] for the k-th
  // request that draws.
  GLT_HOST_DEVICE uint64_t rng_key(int64_t part = 0, int64_t num_parts = 1) const {
    return keys ? static_cast<uint64_t>(keys[*key_index * num_parts + part]) : key;
  }
};

// Where the seeds of a request draw from (count_bounded, draw_bounded): the
// topology of seed i and of draw j, seed i's Philox key and stream, and the
// window of its row it draws from. Here one topology, seed i drawing stream
// i from its whole row.
template <typename index_t>
struct SingleTopology {
  CsrView<index_t> g;

  GLT_HOST_DEVICE const CsrView<index_t>& seed_graph(int64_t) const { return g; }
  GLT_HOST_DEVICE const CsrView<index_t>& draw_graph(int64_t) const { return g; }
  GLT_HOST_DEVICE uint64_t key(int64_t, const DrawTargets& out) const { return out.rng_key(); }
  GLT_HOST_DEVICE uint64_t stream(int64_t i) const { return static_cast<uint64_t>(i); }
  GLT_HOST_DEVICE void note_draw(int64_t, int64_t) const {}
  // The row seed i (of id s) draws from, and its fanout: its own row, k.
  GLT_HOST_DEVICE int64_t row(int64_t, int64_t s) const { return s; }
  GLT_HOST_DEVICE int64_t fanout(int64_t, int64_t k) const { return k; }
  // Seed i's candidate edges within its row [*begin, *end): all of them.
  GLT_HOST_DEVICE void window(int64_t, int64_t, int64_t*, int64_t*) const {}
};

// One topology whose rows' entries are sorted by time, drawn in temporal
// windows: seed i only among the edges of time <= seed_time[i], the latest
// k of them with `last` (temporal_window, as the sample_neighbors_temporal
// op draws them).
template <typename index_t, typename stamp_t>
struct TemporalTopology : SingleTopology<index_t> {
  const stamp_t* edge_time;
  const stamp_t* row_max_time;  // each row's latest time, or null
  const stamp_t* seed_time;
  int64_t k;
  bool last;

  GLT_HOST_DEVICE void window(int64_t i, int64_t s, int64_t* begin, int64_t* end) const {
    temporal_window(this->g.indptr, edge_time, row_max_time, s, seed_time[i], k, last, begin,
                    end);
  }
};

// The partitions of one host (a distributed hop in one call): seed i draws
// from the topology of its partition part[i], with the stream of its rank
// among that partition's seeds under that partition's key, as the sampling
// of each partition's seeds apart (sample_neighbors, in seed order) does.
// draw_part remembers each draw's partition. Graph `given` (-1: none) holds
// neighbors drawn elsewhere (a peer's, over RPC), a row by seed index: its
// seeds take their row whole, in order.
template <typename index_t>
struct PartitionedTopologies {
  const CsrView<index_t>* graphs;  // one a partition
  const int32_t* part;
  const int64_t* rank;
  int32_t* draw_part;
  int64_t num_parts;
  int64_t given = -1;

  GLT_HOST_DEVICE int64_t row(int64_t i, int64_t s) const { return part[i] == given ? i : s; }
  GLT_HOST_DEVICE int64_t fanout(int64_t i, int64_t k) const { return part[i] == given ? -1 : k; }

  GLT_HOST_DEVICE const CsrView<index_t>& seed_graph(int64_t i) const { return graphs[part[i]]; }
  GLT_HOST_DEVICE const CsrView<index_t>& draw_graph(int64_t j) const {
    return graphs[draw_part[j]];
  }
  GLT_HOST_DEVICE uint64_t key(int64_t i, const DrawTargets& out) const {
    return out.rng_key(part[i], num_parts);
  }
  GLT_HOST_DEVICE uint64_t stream(int64_t i) const { return static_cast<uint64_t>(rank[i]); }
  GLT_HOST_DEVICE void note_draw(int64_t j, int64_t i) const { draw_part[j] = part[i]; }
  GLT_HOST_DEVICE void window(int64_t, int64_t, int64_t*, int64_t*) const {}
};

// Draws every seed's neighbors into buffers of `bound` entries, at its
// offset, with the local id of its seed beside each (seed i's draws come
// from the stream and key `source` gives it: stream i of the request's key
// for one topology, as in the sample_neighbors op; `weighted` and
// `with_edge` say whether its topologies have weights and edge ids). A neighbor id
// outside [0, num_ids) is reported and left out of the inducer's inserts.
// Two passes: a thread a seed draws its entries' positions (and writes its
// local id beside each), then a thread a draw reads its entry's neighbor
// and edge id: the random reads of indices, many per seed, are each a
// thread's one load, all in flight at once, rather than one after another
// in their seed's thread.
template <typename Source, typename Backend>
void draw_bounded(const Backend& backend, const Source& source, const SeedRange& seeds,
                  int64_t k, bool replace, bool weighted, bool with_edge, int64_t bound,
                  DrawTargets out, BoundedHop& hop) {
  const auto options = hop.report.options();
  hop.nbrs = at::empty({bound}, options);
  if (out.rows == nullptr) {
    hop.rows = at::empty({bound}, options);
    hop.eids = at::empty({with_edge ? bound : 0}, options);
    out.rows = hop.rows.data_ptr<int64_t>();
    out.eids = with_edge ? hop.eids.data_ptr<int64_t>() : nullptr;
  }
  hop.positions = at::empty({bound}, options);
  const bool keyed = weighted && !replace && k >= 0;
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
    const auto& g = source.seed_graph(i);
    const int64_t r = source.row(i, s);
    int64_t begin = g.indptr[r], end = g.indptr[r + 1];
    source.window(i, s, &begin, &end);
    device::Philox rng(source.key(i, out), source.stream(i));
    sample_positions(g, begin, end, source.fanout(i, k), m, replace, rng, positions + o,
                     key_scratch ? key_scratch + o : nullptr);
    for (int64_t j = o; j < o + m; ++j) {
      out.rows[at + j] = row;
      source.note_draw(j, i);
    }
  });
  backend.for_each(bound, [=] GLT_HOST_DEVICE(int64_t j) {
    if (j >= *total) {
      if (out.claims.slot != nullptr) out.claims.skip(j);
      return;
    }
    const auto& g = source.draw_graph(j);
    const int64_t p = positions[j];
    int64_t v = static_cast<int64_t>(g.indices[p]);
    if (v < 0 || v >= out.num_ids) {
      device::atomic_min(&report[kBadNeighbor], j);  // its entry: indices[positions[j]]
      v = -1;                                         // left out of the inserts
    }
    nbr[j] = v;
    if (out.claims.slot != nullptr) out.claims.claim(j, v);
    if (out.eids) out.eids[out.offset() + j] = g.edge_ids[p];
  });
}

// Disjoint sampling's keys of a request's draws, for its insert: each
// neighbor keyed into its seed's subgraph (the bits of the seed's key above
// `id_mask`, as the disjoint_keys op keys them), -1 for a draw left out (a
// bad neighbor id); a buffer of the hop's bound, its first total entries
// written.
template <typename Backend>
at::Tensor keyed_draws(const Backend& backend, const at::Tensor& seed_keys, const BoundedHop& hop,
                       int64_t id_mask) {
  auto keyed = at::empty_like(hop.nbrs);
  const int64_t* key = seed_keys.data_ptr<int64_t>();
  const int64_t* cnt = hop.counts.data_ptr<int64_t>();
  const int64_t* off = hop.offsets.data_ptr<int64_t>();
  const int64_t* nbr = hop.nbrs.data_ptr<int64_t>();
  int64_t* out = keyed.data_ptr<int64_t>();
  const int64_t high = ~id_mask;
  backend.for_each(seed_keys.numel(), [=] GLT_HOST_DEVICE(int64_t i) {
    const int64_t seed = key[i] & high;
    for (int64_t j = off[i], end = off[i] + cnt[i]; j < end; ++j) {
      out[j] = nbr[j] < 0 ? -1 : (seed | nbr[j]);
    }
  });
  return keyed;
}

}  // namespace kernels
}  // namespace glt
