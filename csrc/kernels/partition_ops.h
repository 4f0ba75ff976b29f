// The distributed hop's partition ops for any backend (the CUDA kernels, and
// the host backend the tests run them with): positions bucketed by partition,
// ids grouped by a partition book, one hop's per-partition pieces stitched
// into seed order, rows scattered to positions, and 1-D concatenation. Each
// equals the CPU kernel's result exactly.
//
// The values' checks run in the kernels' own passes: a pass records the first
// bad position it meets (an atomic min) and the host reads those flags once
// (no_flags, read_flags: checks.h),
// with one copy, before anything is written where a bad value would point.
#pragma once

#include <ATen/ATen.h>

#include <tuple>
#include <vector>

#include "kernels/device.h"
#include "partition_checks.h"

namespace glt {
namespace kernels {

// The positions of `part` in a stable order by partition (a stable sort: a
// radix sort on a GPU).
inline at::Tensor stable_order(const at::Tensor& part) {
  return std::get<1>(part.sort(/*stable=*/true, 0, /*descending=*/false));
}

// bucket_by_partition: (order, counts); values outside [0, num_partitions)
// are an error naming the first.
template <typename Backend>
std::tuple<at::Tensor, at::Tensor> bucket_by_partition(const Backend& backend,
                                                       const at::Tensor& partitions,
                                                       int64_t num_partitions) {
  const auto part = checked_bucket_args(partitions, num_partitions);
  const int64_t n = part.numel();
  auto counts = at::zeros({num_partitions}, part.options().dtype(at::kLong));
  auto flags = no_flags(1, part.options());
  int64_t* count = counts.data_ptr<int64_t>();
  int64_t* first_bad = flags.data_ptr<int64_t>();
  AT_DISPATCH_INTEGRAL_TYPES(part.scalar_type(), "bucket_by_partition", [&] {
    const scalar_t* in = part.data_ptr<scalar_t>();
    backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
      const int64_t p = static_cast<int64_t>(in[i]);
      if (p < 0 || p >= num_partitions) {
        device::atomic_min(first_bad, i);
      } else {
        device::atomic_add(&count[p], 1);
      }
    });
  });
  const int64_t bad = n ? read_flags(flags)[0] : INT64_MAX;
  TORCH_CHECK_VALUE(bad == INT64_MAX, "partitions[", bad, "] is ", part[bad].item<int64_t>(),
                    ", outside [0, ", num_partitions, ")");
  return {stable_order(part), counts};
}

// group_by_partition: (order, counts, grouped ids); an id outside the book,
// or a book entry outside [0, num_partitions), is an error naming the first.
template <typename Backend>
std::tuple<at::Tensor, at::Tensor, at::Tensor> group_by_partition(const Backend& backend,
                                                                  const at::Tensor& book,
                                                                  const at::Tensor& ids,
                                                                  int64_t num_partitions) {
  const auto [book_c, ids_c] = checked_group_args(book, ids, num_partitions);
  const int64_t n = ids_c.numel(), num_ids = book_c.numel();
  auto part = at::empty({n}, ids_c.options().dtype(at::kInt));
  auto counts = at::zeros({num_partitions}, ids_c.options());
  auto flags = no_flags(2, ids_c.options());  // the first bad id, the first bad entry
  const int64_t* id = ids_c.data_ptr<int64_t>();
  int32_t* out_part = part.data_ptr<int32_t>();
  int64_t* count = counts.data_ptr<int64_t>();
  int64_t* first_bad = flags.data_ptr<int64_t>();
  AT_DISPATCH_INTEGRAL_TYPES(book_c.scalar_type(), "group_by_partition", [&] {
    const scalar_t* entry = book_c.data_ptr<scalar_t>();
    backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
      const int64_t v = id[i];
      const int64_t p = (v >= 0 && v < num_ids) ? static_cast<int64_t>(entry[v]) : -1;
      if (v < 0 || v >= num_ids) {
        device::atomic_min(&first_bad[0], i);
      } else if (p < 0 || p >= num_partitions) {
        device::atomic_min(&first_bad[1], i);
      } else {
        device::atomic_add(&count[p], 1);
      }
      out_part[i] = static_cast<int32_t>(p < 0 || p >= num_partitions ? 0 : p);
    });
  });
  const auto bad = n ? read_flags(flags) : std::vector<int64_t>{INT64_MAX, INT64_MAX};
  TORCH_CHECK_VALUE(bad[0] == INT64_MAX, "ids[", bad[0], "] is ",
                    ids_c[bad[0]].item<int64_t>(), ", outside the book's ",
                    num_ids, " ids");
  if (bad[1] != INT64_MAX) {
    const int64_t v = ids_c[bad[1]].item<int64_t>();
    TORCH_CHECK_VALUE(false, "the book gives id ", v, " partition ", book_c[v].item<int64_t>(),
                      ", outside [0, ", num_partitions, ")");
  }
  const auto order = stable_order(part);
  return {order, counts, ids_c.index_select(0, order)};
}

// scatter_rows_: out[positions[i]] = rows[i], after every position is
// checked (nothing is written when one is outside out's rows).
template <typename Backend>
at::Tensor& scatter_rows_(const Backend& backend, at::Tensor& out, const at::Tensor& positions,
                          const at::Tensor& rows) {
  const auto [pos_c, src_rows] = checked_scatter_args(out, positions, rows);
  const int64_t n = pos_c.numel(), num_out = out.size(0), dim = out.size(1);
  if (n == 0 || dim == 0) return out;
  auto flags = no_flags(1, pos_c.options());
  const int64_t* pos = pos_c.data_ptr<int64_t>();
  int64_t* first_bad = flags.data_ptr<int64_t>();
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
    if (pos[i] < 0 || pos[i] >= num_out) device::atomic_min(first_bad, i);
  });
  const int64_t bad = read_flags(flags)[0];
  TORCH_CHECK_VALUE(bad == INT64_MAX, "scatter_rows_: positions[", bad, "] is ",
                    pos_c[bad].item<int64_t>(), ", out of range [0, ",
                    num_out, ")");
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, out.scalar_type(),
                             "scatter_rows_", [&] {
                               const scalar_t* src = src_rows.data_ptr<scalar_t>();
                               scalar_t* dst = out.data_ptr<scalar_t>();
                               backend.for_each(n * dim, [=] GLT_HOST_DEVICE(int64_t k) {
                                 const int64_t i = k / dim, j = k - i * dim;
                                 dst[pos[i] * dim + j] = src[k];
                               });
                             });
  return out;
}

// concat: the parts end to end (torch's batched copy: one launch on a GPU).
inline at::Tensor concat(at::TensorList parts) { return at::cat(checked_concat_parts(parts)); }

// Raises the error stitch_neighbors' flags name (in the CPU kernel's words),
// if any.
inline void check_stitch_flags(const std::vector<int64_t>& bad, const StitchPieces& pieces,
                               const at::Tensor& pos_t, int64_t num_seeds) {
  // The piece holding position i of the concatenated positions.
  auto piece_of = [&](int64_t i) {
    size_t j = 0;
    for (int64_t seen = pieces.pos[0].numel(); i >= seen; seen += pieces.pos[++j].numel()) {
    }
    return j;
  };
  if (bad[0] != INT64_MAX) {
    TORCH_CHECK_VALUE(false, "stitch_neighbors: piece ", piece_of(bad[0]), " names seed ",
                      pos_t[bad[0]].item<int64_t>(), ", outside [0, ", num_seeds, ")");
  }
  TORCH_CHECK_VALUE(bad[1] == INT64_MAX, "stitch_neighbors: seed ",
                    pos_t[bad[1]].item<int64_t>(), " is in two places");
  TORCH_CHECK_VALUE(bad[2] == INT64_MAX, "stitch_neighbors: piece ",
                    piece_of(bad[2]), " has a negative count");
  if (bad[3] != INT64_MAX) {
    const int64_t j = bad[3];
    TORCH_CHECK_VALUE(false, "stitch_neighbors: piece ", j, "'s counts sum to ",
                      pieces.num[j].sum().item<int64_t>(), " but it has ",
                      pieces.nbr[j].numel(), " neighbors");
  }
}

// stitch_neighbors: each seed's run from the piece that names it, in seed
// order. A position outside [0, num_seeds), a seed named twice, a negative
// count, or a piece whose counts do not add up to its neighbors is an error
// naming the first.
template <typename Backend>
std::tuple<at::Tensor, at::Tensor, std::optional<at::Tensor>> stitch_neighbors(
    const Backend& backend, int64_t num_seeds, at::TensorList positions, at::TensorList nbr_nums,
    at::TensorList nbrs, at::TensorList edges) {
  TORCH_CHECK_VALUE(num_seeds >= 0, "stitch_neighbors: num_seeds must be >= 0, got ", num_seeds);
  TORCH_CHECK_VALUE(!positions.empty(), "stitch_neighbors needs at least one piece on a device");
  const StitchPieces pieces = checked_pieces(positions, nbr_nums, nbrs, edges);
  const bool with_edge = !pieces.edge.empty();
  const auto options = pieces.pos[0].options();
  const auto pos_t = at::cat(pieces.pos), num_t = at::cat(pieces.num), nbr_t = at::cat(pieces.nbr);
  const auto edge_t = with_edge ? at::cat(pieces.edge) : at::Tensor();
  const int64_t m = pos_t.numel();
  // Every piece's last position and its neighbors' end in nbr_t: the counts'
  // running sum must reach that end there.
  std::vector<int64_t> piece_end;
  int64_t positions_seen = 0, nbrs_seen = 0;
  for (size_t j = 0; j < pieces.pos.size(); ++j) {
    positions_seen += pieces.pos[j].numel();
    nbrs_seen += pieces.nbr[j].numel();
    piece_end.push_back(positions_seen - 1);
    piece_end.push_back(nbrs_seen);
  }
  auto nbr_num = at::zeros({num_seeds}, options);
  auto hits = at::zeros({num_seeds}, options);
  auto flags = no_flags(4, options);  // bad position, seed named twice, negative count, piece
  const auto src_end = num_t.cumsum(0);
  const at::Tensor ends = backend.to_device(at::tensor(piece_end, at::kLong), options.device());
  const int64_t* pos = pos_t.data_ptr<int64_t>();
  const int64_t* num = num_t.data_ptr<int64_t>();
  const int64_t* end_of = src_end.data_ptr<int64_t>();
  const int64_t* piece = ends.data_ptr<int64_t>();
  int64_t* count = nbr_num.data_ptr<int64_t>();
  int64_t* hit = hits.data_ptr<int64_t>();
  int64_t* bad = flags.data_ptr<int64_t>();
  backend.for_each(m, [=] GLT_HOST_DEVICE(int64_t i) {
    const int64_t s = pos[i];
    if (s < 0 || s >= num_seeds) {
      device::atomic_min(&bad[0], i);
      return;
    }
    if (device::atomic_add(&hit[s], 1) != 0) device::atomic_min(&bad[1], i);
    if (num[i] < 0) device::atomic_min(&bad[2], i);
    count[s] = num[i];
  });
  backend.for_each(static_cast<int64_t>(pieces.pos.size()), [=] GLT_HOST_DEVICE(int64_t j) {
    const int64_t last = piece[2 * j], reached = last < 0 ? 0 : end_of[last];
    if (reached != piece[2 * j + 1]) device::atomic_min(&bad[3], j);
  });
  check_stitch_flags(read_flags(flags), pieces, pos_t, num_seeds);
  const auto seed_start = nbr_num.cumsum(0) - nbr_num;
  auto out_nbr = at::empty({nbr_t.numel()}, options);
  std::optional<at::Tensor> out_edge;
  if (with_edge) out_edge = at::empty({nbr_t.numel()}, options);
  const int64_t* start = seed_start.data_ptr<int64_t>();
  const int64_t* src_nbr = nbr_t.data_ptr<int64_t>();
  const int64_t* src_edge = with_edge ? edge_t.data_ptr<int64_t>() : nullptr;
  int64_t* dst_nbr = out_nbr.data_ptr<int64_t>();
  int64_t* dst_edge = with_edge ? out_edge->data_ptr<int64_t>() : nullptr;
  backend.for_each(m, [=] GLT_HOST_DEVICE(int64_t i) {
    const int64_t from = end_of[i] - num[i], to = start[pos[i]];
    for (int64_t j = 0; j < num[i]; ++j) {
      dst_nbr[to + j] = src_nbr[from + j];
      if (dst_edge) dst_edge[to + j] = src_edge[from + j];
    }
  });
  return {out_nbr, nbr_num, out_edge};
}

}  // namespace kernels
}  // namespace glt
