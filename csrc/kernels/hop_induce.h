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
  kBadNeighbor = 5,  // a draw of a negative neighbor id
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
  at::Tensor report;
};

// The counts and offsets of a request's draws: seeds outside the rows,
// unseen by the inducer (`seed_local` -1) or with a row outside indices get
// none and are reported.
template <typename index_t, typename Backend>
void count_bounded(const Backend& backend, const CsrView<index_t>& g, int64_t num_rows,
                   int64_t num_entries, const at::Tensor& seeds, const at::Tensor& seed_local,
                   int64_t k, bool replace, BoundedHop& hop) {
  const int64_t n = seeds.numel();
  hop.counts = at::empty({n}, seeds.options());
  const int64_t* seed = seeds.data_ptr<int64_t>();
  const int64_t* local = seed_local.data_ptr<int64_t>();
  int64_t* cnt = hop.counts.data_ptr<int64_t>();
  int64_t* report = hop.report.data_ptr<int64_t>();
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
    cnt[i] = 0;
    const int64_t s = seed[i];
    if (s < 0 || s >= num_rows) {
      device::atomic_min(&report[kBadSeed], i);
      return;
    }
    if (local[i] < 0) {
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
  hop.offsets = at::zeros({n + 1}, seeds.options());
  hop.offsets.narrow(0, 1, n).copy_(hop.counts.cumsum(0));
  int64_t* off = hop.offsets.data_ptr<int64_t>();
  backend.for_each(1, [=] GLT_HOST_DEVICE(int64_t) { report[kTotal] = off[n]; });
}

// Draws every seed's neighbors into buffers of `bound` entries, at its
// offset, with the local index of its seed beside each (seed i's draws come
// from stream i of `key`, as in the sample_neighbors op).
template <typename index_t, typename Backend>
void draw_bounded(const Backend& backend, const CsrView<index_t>& g, const at::Tensor& seeds,
                  const at::Tensor& seed_local, int64_t k, bool replace, uint64_t key,
                  int64_t bound, BoundedHop& hop) {
  const auto options = seeds.options();
  hop.nbrs = at::empty({bound}, options);
  hop.rows = at::empty({bound}, options);
  hop.eids = at::empty({g.edge_ids ? bound : 0}, options);
  auto pos = at::empty({bound}, options);
  const bool keyed = g.weights && !replace && k >= 0;
  auto keys = at::empty({keyed ? bound : 0}, options.dtype(at::kDouble));
  const int64_t* seed = seeds.data_ptr<int64_t>();
  const int64_t* local = seed_local.data_ptr<int64_t>();
  const int64_t* cnt = hop.counts.data_ptr<int64_t>();
  const int64_t* off = hop.offsets.data_ptr<int64_t>();
  int64_t* nbr = hop.nbrs.data_ptr<int64_t>();
  int64_t* row = hop.rows.data_ptr<int64_t>();
  int64_t* eid = g.edge_ids ? hop.eids.data_ptr<int64_t>() : nullptr;
  int64_t* scratch = pos.data_ptr<int64_t>();
  double* key_scratch = keyed ? keys.data_ptr<double>() : nullptr;
  int64_t* report = hop.report.data_ptr<int64_t>();
  backend.for_each(seeds.numel(), [=] GLT_HOST_DEVICE(int64_t i) {
    const int64_t m = cnt[i];
    if (m == 0) return;
    const int64_t o = off[i], s = seed[i];
    device::Philox rng(key, static_cast<uint64_t>(i));
    sample_positions(g, g.indptr[s], g.indptr[s + 1], k, m, replace, rng, scratch + o,
                     key_scratch ? key_scratch + o : nullptr);
    for (int64_t j = o; j < o + m; ++j) {
      const int64_t v = static_cast<int64_t>(g.indices[scratch[j]]);
      nbr[j] = v;
      if (v < 0) device::atomic_min(&report[kBadNeighbor], j);
      if (eid) eid[j] = g.edge_ids[scratch[j]];
      row[j] = local[i];
    }
  });
}

}  // namespace kernels
}  // namespace glt
