// A hop whose draws are given (the device inducer's induce_next: neighbors
// drawn elsewhere, by sample_neighbors or by a peer over RPC) added to the
// inducer's tables with the host told once: the checks of its inputs and
// the count of its new nodes stay on the device, in a report of
// kernels/hop_induce.h's layout, until the caller reads every report of the
// hop at once. Buffers are sized by the neighbors given, which the counts
// must add up to (the report's kTotal says whether they do).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <tuple>
#include <vector>

#include "kernels/device.h"
#include "kernels/hop_induce.h"

namespace glt {
namespace kernels {

// What a given request's report holds in the slots a drawn one's would:
// kTotal the counts' sum; kBadSeed a negative source id; kUnseenSeed a
// source the inducer has not met; these the first index of a negative count
// and of a negative neighbor id.
constexpr int64_t kNegativeCount = kBadRow;
constexpr int64_t kNegativeNeighbor = kBadNeighbor;

// One request of a given hop, checked on the host: its types, sources,
// neighbors and counts, and where its rows and columns go.
struct GivenRequest {
  int64_t src_type = 0, nbr_type = 0;
  at::Tensor src, nbr, num;
  at::Tensor row, col;
};

// What induce_next gives: the nodes new to each type, then each request's
// rows and columns.
using GivenHopOutputs =
    std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>>;

// A given request's checks and rows: source i's local id (src_local[i], -1
// for one the tables have not met) repeated nbr_num[i] times into `rows`,
// one entry a neighbor of `nbrs`; each entry finds its source by a binary
// search of the counts' running sum, so a source of many neighbors holds up
// no thread longer than another. With counts that are negative or do not
// add up to the neighbors, `rows` holds what the search found there and the
// report says so.
template <typename Backend>
void given_rows(const Backend& backend, const at::Tensor& src, const at::Tensor& src_local,
                const at::Tensor& nbr_num, const at::Tensor& nbrs, at::Tensor& rows,
                at::Tensor& report) {
  const int64_t n = src.numel(), m = nbrs.numel();
  const at::Tensor ends = nbr_num.cumsum(0);
  const int64_t* id = src.data_ptr<int64_t>();
  const int64_t* local = src_local.data_ptr<int64_t>();
  const int64_t* num = nbr_num.data_ptr<int64_t>();
  const int64_t* end = ends.data_ptr<int64_t>();
  const int64_t* nbr = nbrs.data_ptr<int64_t>();
  int64_t* row = rows.data_ptr<int64_t>();
  int64_t* r = report.data_ptr<int64_t>();
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
    if (i == n - 1) r[kTotal] = end[i];
    if (id[i] < 0) {
      device::atomic_min(&r[kBadSeed], i);
    } else if (local[i] < 0) {
      device::atomic_min(&r[kUnseenSeed], i);
    }
    if (num[i] < 0) device::atomic_min(&r[kNegativeCount], i);
  });
  backend.for_each(m, [=] GLT_HOST_DEVICE(int64_t j) {
    if (nbr[j] < 0) device::atomic_min(&r[kNegativeNeighbor], j);
    int64_t lo = 0, hi = n;  // the first source whose running sum passes j
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (end[mid] > j) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    row[j] = lo < n ? local[lo] : -1;
  });
}

// Whether a given request's report `r` found its inputs sound: `num_nbrs`
// neighbors given.
inline bool given_sound(const int64_t* r, int64_t num_nbrs) {
  return r[kBadSeed] == kNone && r[kUnseenSeed] == kNone && r[kNegativeCount] == kNone &&
         r[kNegativeNeighbor] == kNone && r[kTotal] == num_nbrs;
}

// Raises what a given request's report `r` found (given_sound is false):
// the check of its sources' ids first, then its neighbors', its counts',
// their sum's, and last whether its sources were met before.
inline void raise_given_failure(const int64_t* r, const at::Tensor& src, const at::Tensor& nbrs) {
  const auto at = [](const at::Tensor& t, int64_t i) { return t[i].item<int64_t>(); };
  TORCH_CHECK_VALUE(r[kBadSeed] == kNone, "srcs holds ids outside [0, ", INT64_MAX, "): ",
                    at(src, r[kBadSeed]));
  TORCH_CHECK_VALUE(r[kNegativeNeighbor] == kNone, "nbrs holds ids outside [0, ", INT64_MAX,
                    "): ", at(nbrs, r[kNegativeNeighbor]));
  TORCH_CHECK_VALUE(r[kNegativeCount] == kNone, "nbr_nums must be >= 0");
  TORCH_CHECK_VALUE(r[kTotal] == nbrs.numel(), "nbr_nums sums to ", r[kTotal],
                    " but nbrs holds ", nbrs.numel(), " entries");
  TORCH_CHECK_VALUE(false, "source node ", at(src, r[kUnseenSeed]),
                    " was not seen by the inducer before this hop");
}

}  // namespace kernels
}  // namespace glt
