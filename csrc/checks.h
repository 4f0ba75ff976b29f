// Input checks shared by the CPU and CUDA kernels: each names the argument
// and what is wrong with it (a Python ValueError), before any memory is read.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/MemoryOverlap.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "read_checks.h"

namespace glt {

// Checks that `t` is a 1-D int64 tensor.
inline void check_index(const at::Tensor& t, const char* name) {
  TORCH_CHECK_VALUE(t.scalar_type() == at::kLong, name, " must be int64, got ", t.scalar_type());
  TORCH_CHECK_VALUE(t.dim() == 1, name, " must be 1-D, got shape ", t.sizes());
}

// Checks that `t` lives on `device`.
inline void check_device(const at::Tensor& t, const char* name, const at::Device& device) {
  TORCH_CHECK_VALUE(t.device() == device, name, " must be on ", device, " (as the topology), got ",
                    t.device());
}

// Checks that `outs` is empty (no outputs given) or holds one per edge type.
inline void check_outputs(const std::vector<at::Tensor>& outs, size_t num_etypes,
                          const char* name) {
  TORCH_CHECK_VALUE(outs.empty() || outs.size() == num_etypes, name,
                    " must be empty or hold one tensor per edge type (", num_etypes, "), got ",
                    outs.size());
}

// induce_next's lists: src_types, nbr_types, srcs, nbrs and nbr_nums of one
// length (the requests'), the outputs empty or one a request.
inline void check_induce_next_lists(const std::vector<int64_t>& src_types,
                                    const std::vector<int64_t>& nbr_types,
                                    const std::vector<at::Tensor>& srcs,
                                    const std::vector<at::Tensor>& nbrs,
                                    const std::vector<at::Tensor>& nbr_nums,
                                    const std::vector<at::Tensor>& row_outs,
                                    const std::vector<at::Tensor>& col_outs) {
  const size_t num_etypes = srcs.size();
  TORCH_CHECK_VALUE(src_types.size() == num_etypes && nbr_types.size() == num_etypes &&
                        nbrs.size() == num_etypes && nbr_nums.size() == num_etypes,
                    "induce_next expects src_types, nbr_types, srcs, nbrs and nbr_nums of one "
                    "length");
  check_outputs(row_outs, num_etypes, "row_outs");
  check_outputs(col_outs, num_etypes, "col_outs");
}

// Checks a tensor given to be written: `n` int64 values, 1-D, contiguous, on
// `device`, sharing no memory with `inputs`. Returns it.
inline const at::Tensor& checked_output(const at::Tensor& out, int64_t n,
                                        const at::Device& device, const char* name,
                                        std::initializer_list<at::Tensor> inputs) {
  check_index(out, name);
  TORCH_CHECK_VALUE(out.device() == device, name, " must be on ", device, ", got ", out.device());
  TORCH_CHECK_VALUE(out.is_contiguous(), name, " must be contiguous");
  TORCH_CHECK_VALUE(out.numel() == n, name, " must hold ", n, " entries, got ", out.numel());
  for (const at::Tensor& in : inputs) {
    if (!in.defined()) continue;
    const auto overlap = at::get_overlap_status(out, in);
    TORCH_CHECK_VALUE(overlap != at::MemOverlapStatus::Full &&
                          overlap != at::MemOverlapStatus::Partial,
                      name, " shares memory with an input");
  }
  return out;
}

// Checks that every value of the 1-D int64 tensor `t` lies in [0, upper).
// On the CPU one pass on this thread (min() and max() are two OpenMP
// regions, whose threads spin after them beside busy processes).
inline void check_range(const at::Tensor& t, int64_t upper, const char* name) {
  if (t.numel() == 0) return;
  int64_t lo, hi;
  if (t.device().is_cpu()) {
    const at::Tensor c = t.contiguous();
    const int64_t* v = c.data_ptr<int64_t>();
    lo = hi = v[0];
    for (int64_t i = 1, n = c.numel(); i < n; ++i) {
      lo = std::min(lo, v[i]);
      hi = std::max(hi, v[i]);
    }
  } else {
    lo = t.min().item<int64_t>();
    hi = t.max().item<int64_t>();
  }
  if (lo < 0 || hi >= upper) raise_ids_outside(lo, hi, upper, name);
}

// Checks a compressed sparse topology's layout (indptr and indices 1-D,
// contiguous, of one dtype, int32 or int64, on one device), reading none of
// its values; returns its number of rows.
inline int64_t check_csr_layout(const at::Tensor& indptr, const at::Tensor& indices) {
  const auto dtype = indptr.scalar_type();
  TORCH_CHECK_VALUE(dtype == at::kLong || dtype == at::kInt, "indptr must be int64 or int32, got ",
                    dtype);
  TORCH_CHECK_VALUE(indices.scalar_type() == dtype, "indices must have indptr's dtype (", dtype,
                    "), got ", indices.scalar_type());
  TORCH_CHECK_VALUE(indptr.dim() == 1 && indices.dim() == 1, "indptr and indices must be 1-D");
  TORCH_CHECK_VALUE(indptr.numel() >= 1, "indptr must hold at least one entry");
  TORCH_CHECK_VALUE(indptr.is_contiguous() && indices.is_contiguous(),
                    "indptr and indices must be contiguous");
  check_device(indices, "indices", indptr.device());
  return indptr.numel() - 1;
}

// check_csr_layout, and that indptr ends at the end of indices; returns the
// number of rows.
inline int64_t check_csr(const at::Tensor& indptr, const at::Tensor& indices) {
  const int64_t num_rows = check_csr_layout(indptr, indices);
  const int64_t end = indptr[num_rows].item<int64_t>();
  TORCH_CHECK_VALUE(end == indices.numel(), "indptr ends at ", end, " but indices holds ",
                    indices.numel(), " entries");
  return num_rows;
}

// Checks `parts`, the partition of each of `ids` (each a `what`, e.g.
// "seed"): 1-D, on the ids' device, of an integer dtype, one entry per id.
inline void check_partition_of_each(const at::Tensor& parts, const at::Tensor& ids,
                                    const char* what) {
  TORCH_CHECK_VALUE(parts.dim() == 1 && parts.numel() == ids.numel() &&
                        parts.device() == ids.device() &&
                        at::isIntegralType(parts.scalar_type(), /*includeBool=*/false),
                    "parts must be a 1-D integer tensor on the ", what, "s' device (",
                    ids.device(), ") with one entry per ", what, " (", ids.numel(), "), got ",
                    parts.scalar_type(), " of shape ", parts.sizes(), " on ", parts.device());
}

// Checks optional per-edge edge ids (int64) and weights (float32).
inline void check_edge_data(const c10::optional<at::Tensor>& edge_ids,
                            const c10::optional<at::Tensor>& edge_weights,
                            const at::Tensor& indices) {
  if (edge_ids.has_value()) {
    check_index(*edge_ids, "edge_ids");
    check_device(*edge_ids, "edge_ids", indices.device());
    TORCH_CHECK_VALUE(edge_ids->numel() == indices.numel() && edge_ids->is_contiguous(),
                      "edge_ids must be contiguous with one entry per edge");
  }
  if (edge_weights.has_value()) {
    TORCH_CHECK_VALUE(edge_weights->scalar_type() == at::kFloat && edge_weights->dim() == 1 &&
                          edge_weights->is_contiguous() && edge_weights->numel() == indices.numel(),
                      "edge_weights must be a contiguous 1-D float32 tensor with one entry per "
                      "edge");
    check_device(*edge_weights, "edge_weights", indices.device());
  }
}

// -- each op's inputs, checked (the CPU and CUDA kernels share these) --------

// coo_to_csr: (row, col), contiguous.
inline std::pair<at::Tensor, at::Tensor> checked_coo_args(const at::Tensor& row,
                                                          const at::Tensor& col, int64_t num_rows,
                                                          int64_t num_cols) {
  check_index(row, "row");
  check_index(col, "col");
  check_device(col, "col", row.device());
  TORCH_CHECK_VALUE(row.numel() == col.numel(), "row and col must have the same length, got ",
                    row.numel(), " and ", col.numel());
  TORCH_CHECK_VALUE(num_rows >= 0 && num_cols >= 0, "num_rows and num_cols must be >= 0, got ",
                    num_rows, " and ", num_cols);
  auto rows = row.contiguous(), cols = col.contiguous();
  check_range(rows, num_rows, "row");
  check_range(cols, num_cols, "col");
  return {rows, cols};
}

// coo_to_csr's indices dtype: int64 by default, or int32 where the edge
// positions and columns fit.
inline at::ScalarType checked_indices_dtype(const c10::optional<at::ScalarType>& dtype,
                                            int64_t num_edges, int64_t num_cols) {
  const at::ScalarType out = dtype.value_or(at::kLong);
  TORCH_CHECK_VALUE(out == at::kLong || out == at::kInt,
                    "indices_dtype must be int32 or int64, got ", out);
  constexpr int64_t int32_max = std::numeric_limits<int32_t>::max();
  TORCH_CHECK_VALUE(out == at::kLong || (num_edges <= int32_max && num_cols <= int32_max),
                    "indices_dtype int32 cannot hold ", num_edges, " edges over ", num_cols,
                    " columns");
  return out;
}

// The most draws one sampling call may make: their int64 ids and positions
// stay addressable, so no count or offset of theirs overflows.
constexpr int64_t kMaxDraws = std::numeric_limits<int64_t>::max() / 16;

// A fanout `k` for `num_seeds` seeds: -1 (all) or k >= 0 with at most
// kMaxDraws draws in all (a seed draws at most k).
inline void check_fanout(int64_t k, int64_t num_seeds, const char* name = "num_neighbors") {
  TORCH_CHECK_VALUE(k >= -1, name, " must be -1 (all) or >= 0, got ", k);
  TORCH_CHECK_VALUE(k <= kMaxDraws / std::max<int64_t>(num_seeds, 1), name, " ", k, " for ",
                    num_seeds, " seeds asks for more draws than memory can hold");
}

// sample_neighbors: the seeds, contiguous. `check_seed_range` false: the
// caller checks that each seed is a row as it reads it (the CPU kernels'
// plan, in parallel; cpu/sampling/neighbor_draws.h).
inline at::Tensor checked_sampling_args(const at::Tensor& indptr, const at::Tensor& indices,
                                        const c10::optional<at::Tensor>& edge_ids,
                                        const c10::optional<at::Tensor>& edge_weights,
                                        const at::Tensor& seeds, int64_t num_neighbors,
                                        bool check_seed_range = true) {
  const int64_t num_rows = check_csr(indptr, indices);
  check_edge_data(edge_ids, edge_weights, indices);
  check_index(seeds, "seeds");
  check_device(seeds, "seeds", indptr.device());
  check_fanout(num_neighbors, seeds.numel());
  auto seed_t = seeds.contiguous();
  if (check_seed_range) check_range(seed_t, num_rows, "seeds");
  return seed_t;
}

// Times are int64 or float64: AT_DISPATCH over those two, as scalar_t.
#define GLT_DISPATCH_TIME_TYPES(TYPE, NAME, ...)           \
  AT_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE(at::kLong, __VA_ARGS__) \
                                     AT_DISPATCH_CASE(at::kDouble, __VA_ARGS__))

// sample_neighbors_temporal: the edges' times (one per entry of indices,
// int64 or float64, contiguous) and the seeds' (one per seed, of the edges'
// dtype); returns the seeds' times, contiguous. That each row's times are
// sorted is the caller's to keep (a row that is not gets a wrong window,
// never a read out of bounds).
inline at::Tensor checked_time_args(const at::Tensor& edge_time, const at::Tensor& indices,
                                    const at::Tensor& seed_time, const at::Tensor& seeds) {
  const auto dtype = edge_time.scalar_type();
  TORCH_CHECK_VALUE(dtype == at::kLong || dtype == at::kDouble,
                    "edge_time must be int64 or float64, got ", dtype);
  TORCH_CHECK_VALUE(edge_time.dim() == 1 && edge_time.is_contiguous() &&
                        edge_time.numel() == indices.numel(),
                    "edge_time must be a contiguous 1-D tensor with one entry per edge (",
                    indices.numel(), "), got shape ", edge_time.sizes());
  check_device(edge_time, "edge_time", indices.device());
  TORCH_CHECK_VALUE(seed_time.scalar_type() == dtype, "seed_time must have edge_time's dtype (",
                    dtype, "), got ", seed_time.scalar_type());
  TORCH_CHECK_VALUE(seed_time.dim() == 1 && seed_time.numel() == seeds.numel(),
                    "seed_time must be 1-D with one entry per seed (", seeds.numel(),
                    "), got shape ", seed_time.sizes());
  check_device(seed_time, "seed_time", indices.device());
  return seed_time.contiguous();
}

// sample_neighbors_temporal's row_max_time, where given: one time per row
// (indptr's length less one), of edge_time's dtype and device, contiguous.
// That it holds each row's last time is the caller's to keep (a wrong one
// gives a wrong window, never a read out of bounds).
inline void check_row_max_time(const std::optional<at::Tensor>& row_max_time,
                               const at::Tensor& edge_time, const at::Tensor& indptr) {
  if (!row_max_time.has_value()) return;
  const at::Tensor& t = *row_max_time;
  TORCH_CHECK_VALUE(t.scalar_type() == edge_time.scalar_type(),
                    "row_max_time must have edge_time's dtype (", edge_time.scalar_type(),
                    "), got ", t.scalar_type());
  TORCH_CHECK_VALUE(t.dim() == 1 && t.is_contiguous() && t.numel() == indptr.numel() - 1,
                    "row_max_time must be a contiguous 1-D tensor with one entry per row (",
                    indptr.numel() - 1, "), got shape ", t.sizes());
  check_device(t, "row_max_time", indptr.device());
}

// sample_negative's node counts and fixed ends.
struct NegativeArgs {
  int64_t num_rows;
  int64_t num_samples;  // the fixed ends' count when they are given
  at::Tensor fixed;     // contiguous; undefined when not given
};

inline NegativeArgs checked_negative_args(const at::Tensor& indptr, const at::Tensor& indices,
                                          const c10::optional<at::Tensor>& fixed, bool fixed_is_row,
                                          int64_t num_cols, int64_t num_samples, int64_t trials) {
  NegativeArgs args{check_csr(indptr, indices), num_samples, at::Tensor()};
  TORCH_CHECK_VALUE(trials >= 1, "trials must be >= 1, got ", trials);
  TORCH_CHECK_VALUE(num_samples >= 0, "num_samples must be >= 0, got ", num_samples);
  if (fixed.has_value()) {
    check_index(*fixed, "fixed");
    check_device(*fixed, "fixed", indptr.device());
    args.fixed = fixed->contiguous();
    check_range(args.fixed, fixed_is_row ? args.num_rows : num_cols, "fixed");
    args.num_samples = args.fixed.numel();
  }
  TORCH_CHECK_VALUE(args.num_samples == 0 || (num_cols > 0 && args.num_rows > 0),
                    "negative sampling needs a non-empty node set");
  return args;
}

// has_edge: (rows, cols), contiguous.
inline std::pair<at::Tensor, at::Tensor> checked_edge_query_args(const at::Tensor& indptr,
                                                                 const at::Tensor& indices,
                                                                 const at::Tensor& rows,
                                                                 const at::Tensor& cols) {
  const int64_t num_rows = check_csr(indptr, indices);
  check_index(rows, "rows");
  check_index(cols, "cols");
  check_device(rows, "rows", indptr.device());
  check_device(cols, "cols", indptr.device());
  TORCH_CHECK_VALUE(rows.numel() == cols.numel(), "rows and cols differ in length: ", rows.numel(),
                    " vs ", cols.numel());
  auto r = rows.contiguous(), c = cols.contiguous();
  check_range(r, num_rows, "rows");
  return {r, c};
}

// induced_subgraph: the nodes, contiguous (their uniqueness is the kernel's).
inline at::Tensor checked_subgraph_args(const at::Tensor& indptr, const at::Tensor& indices,
                                        const c10::optional<at::Tensor>& edge_ids,
                                        const at::Tensor& nodes) {
  check_csr(indptr, indices);
  check_edge_data(edge_ids, c10::nullopt, indices);
  check_index(nodes, "nodes");
  check_device(nodes, "nodes", indptr.device());
  auto node_t = nodes.contiguous();
  check_range(node_t, INT64_MAX, "nodes");
  return node_t;
}

// gather_rows: the ids, id2index and positions, contiguous (undefined when
// not given).
struct GatherArgs {
  at::Tensor ids, id2index, positions;
};

inline GatherArgs checked_gather_args(const at::Tensor& table, const at::Tensor& ids,
                                      const c10::optional<at::Tensor>& id2index,
                                      const c10::optional<at::Tensor>& positions,
                                      int64_t num_out_rows) {
  TORCH_CHECK_VALUE(table.dim() == 2, "feature table must be 2-D, got shape ", table.sizes());
  TORCH_CHECK_VALUE(table.is_contiguous(), "feature table must be contiguous");
  check_index(ids, "ids");
  check_device(ids, "ids", table.device());
  GatherArgs args{ids.contiguous(), at::Tensor(), at::Tensor()};
  if (id2index.has_value()) {
    check_index(*id2index, "id2index");
    check_device(*id2index, "id2index", table.device());
    args.id2index = id2index->contiguous();
  }
  if (positions.has_value()) {
    check_index(*positions, "positions");
    check_device(*positions, "positions", table.device());
    TORCH_CHECK_VALUE(positions->numel() == ids.numel(), "positions holds ", positions->numel(),
                      " entries for ", ids.numel(), " ids");
    TORCH_CHECK_VALUE(num_out_rows >= 0, "num_out_rows must be given with positions");
    args.positions = positions->contiguous();
    check_range(args.positions, num_out_rows, "positions");
  }
  return args;
}

}  // namespace glt
