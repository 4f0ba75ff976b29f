// Topology kernels for any backend: COO -> CSR, edge lookups, negative
// sampling and induced subgraphs. Each equals the CPU kernel's result
// exactly, except negative sampling, whose draws come from Philox streams.
#pragma once

#include <ATen/ATen.h>

#include <tuple>

#include "checks.h"
#include "kernels/hash_table.h"
#include "kernels/unified_gather.h"

namespace glt {
namespace kernels {

// Whether `col` is among the sorted entries [begin, end) of `indices`.
template <typename index_t>
GLT_HOST_DEVICE bool sorted_contains(const index_t* indices, int64_t begin, int64_t end,
                                     int64_t col) {
  while (begin < end) {
    const int64_t mid = begin + (end - begin) / 2;
    const int64_t v = static_cast<int64_t>(indices[mid]);
    if (v == col) return true;
    if (v < col) {
      begin = mid + 1;
    } else {
      end = mid;
    }
  }
  return false;
}

// COO -> CSR of `num_rows` rows: (indptr, indices, perm), each row's entries
// sorted by column, ties in input order (two stable sorts: by column, then
// by row). `row` and `col` are int64, checked by the caller.
template <typename Backend>
std::tuple<at::Tensor, at::Tensor, at::Tensor> coo_to_csr_impl(const Backend& backend,
                                                               const at::Tensor& row,
                                                               const at::Tensor& col,
                                                               int64_t num_rows) {
  const auto options = row.options();
  const int64_t n = row.numel();
  auto indptr = at::zeros({num_rows + 1}, options);
  if (n == 0) return {indptr, at::empty({0}, options), at::empty({0}, options)};
  const auto by_col = std::get<1>(col.sort(/*stable=*/true, 0, false));
  const auto order = std::get<1>(row.index_select(0, by_col).sort(/*stable=*/true, 0, false));
  auto perm = by_col.index_select(0, order);
  auto indices = col.index_select(0, perm);
  auto counts = at::zeros({num_rows}, options);
  const int64_t* r = row.data_ptr<int64_t>();
  int64_t* count = counts.data_ptr<int64_t>();
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) { device::atomic_add(&count[r[i]], 1); });
  indptr.narrow(0, 1, num_rows).copy_(counts.cumsum(0));
  return {indptr, indices, perm};
}

// Whether each (rows[i], cols[i]) is an edge.
template <typename index_t, typename Backend>
at::Tensor has_edge_impl(const Backend& backend, const at::Tensor& indptr,
                         const at::Tensor& indices, const at::Tensor& rows,
                         const at::Tensor& cols) {
  auto out = at::empty({rows.numel()}, rows.options().dtype(at::kBool));
  const index_t* ptr = indptr.data_ptr<index_t>();
  const index_t* idx = indices.data_ptr<index_t>();
  const int64_t* r = rows.data_ptr<int64_t>();
  const int64_t* c = cols.data_ptr<int64_t>();
  bool* found = out.data_ptr<bool>();
  auto flags = no_flags(1, rows.options());
  int64_t* first_bad = flags.data_ptr<int64_t>();
  const int64_t num_entries = indices.numel();
  backend.for_each(rows.numel(), [=] GLT_HOST_DEVICE(int64_t i) {
    const int64_t first = ptr[r[i]], last = ptr[r[i] + 1];
    const bool readable = row_in_bounds(first, last, num_entries);
    if (!readable) device::atomic_min(first_bad, i);
    found[i] = readable && sorted_contains(idx, first, last, c[i]);
  });
  check_rows_read(flags, rows, indptr, num_entries);
  return out;
}

// Draws `num_samples` (row, col) pairs that are not edges, each with up to
// `trials` tries from its own Philox stream; with `fixed`, one pair per
// fixed row (or col). Without `padding`, pairs whose tries all hit edges are
// dropped. `fixed` may be null.
template <typename index_t, typename Backend>
std::tuple<at::Tensor, at::Tensor> sample_negative_impl(
    const Backend& backend, const at::Tensor& indptr, const at::Tensor& indices,
    const at::Tensor* fixed, bool fixed_is_row, int64_t num_rows, int64_t num_cols,
    int64_t num_samples, int64_t trials, bool padding, int64_t rng_seed) {
  const auto options = indptr.options().dtype(at::kLong);
  auto out_row = at::empty({num_samples}, options);
  auto out_col = at::empty({num_samples}, options);
  if (num_samples == 0) return {out_row, out_col};
  auto ok = at::empty({num_samples}, options);
  const index_t* ptr = indptr.data_ptr<index_t>();
  const index_t* idx = indices.data_ptr<index_t>();
  const int64_t* fixed_ids = fixed ? fixed->data_ptr<int64_t>() : nullptr;
  int64_t* r_out = out_row.data_ptr<int64_t>();
  int64_t* c_out = out_col.data_ptr<int64_t>();
  int64_t* good = ok.data_ptr<int64_t>();
  auto flags = no_flags(1, options);
  int64_t* first_bad = flags.data_ptr<int64_t>();
  const int64_t num_entries = indices.numel();
  const uint64_t key = static_cast<uint64_t>(rng_seed);
  backend.for_each(num_samples, [=] GLT_HOST_DEVICE(int64_t i) {
    device::Philox rng(key, static_cast<uint64_t>(i));
    const bool row_fixed = fixed_ids && fixed_is_row;
    const bool col_fixed = fixed_ids && !fixed_is_row;
    int64_t r = 0, c = 0;
    good[i] = 0;
    for (int64_t t = 0; t < trials; ++t) {
      r = row_fixed ? fixed_ids[i] : static_cast<int64_t>(rng.uniform(num_rows));
      c = col_fixed ? fixed_ids[i] : static_cast<int64_t>(rng.uniform(num_cols));
      if (!row_in_bounds(ptr[r], ptr[r + 1], num_entries)) {
        device::atomic_min(first_bad, i);
        break;
      }
      if (!sorted_contains(idx, ptr[r], ptr[r + 1], c)) {
        good[i] = 1;
        break;
      }
    }
    r_out[i] = r;
    c_out[i] = c;
  });
  check_rows_read(flags, out_row, indptr, num_entries);
  if (padding) return {out_row, out_col};
  const auto kept = ok.to(at::kBool);
  return {out_row.masked_select(kept), out_col.masked_select(kept)};
}

// The edges among `nodes` (unique ids): (local row, local col, edge ids or an
// empty tensor), row by row of `nodes`, each row's edges in stored order.
template <typename index_t, typename Backend>
std::tuple<at::Tensor, at::Tensor, at::Tensor> induced_subgraph_impl(const Backend& backend,
                                                                     const at::Tensor& indptr,
                                                                     const at::Tensor& indices,
                                                                     const at::Tensor* edge_ids,
                                                                     const at::Tensor& nodes) {
  const auto options = nodes.options();
  const int64_t n = nodes.numel();
  const int64_t num_rows = indptr.numel() - 1;
  const int64_t capacity = device::table_capacity(n);
  auto keys = at::full({capacity}, device::kEmptyKey, options);
  auto vals = at::full({capacity}, -1, options);
  auto dup = at::full({1}, n, options);  // the first position that repeats a node
  const int64_t* node = nodes.data_ptr<int64_t>();
  int64_t* key = keys.data_ptr<int64_t>();
  int64_t* val = vals.data_ptr<int64_t>();
  int64_t* first_dup = dup.data_ptr<int64_t>();
  const uint64_t mask = capacity - 1;
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
    const int64_t slot = device::hash_insert(key, mask, node[i]);
    const int64_t other = device::atomic_cas(&val[slot], -1, i);
    if (other != -1) device::atomic_min(first_dup, other > i ? other : i);
  });
  const int64_t repeated = dup.item<int64_t>();
  TORCH_CHECK_VALUE(repeated == n, "nodes must be unique; ", nodes[repeated].item<int64_t>(),
                    " appears twice");
  const index_t* ptr = indptr.data_ptr<index_t>();
  const index_t* idx = indices.data_ptr<index_t>();
  auto counts = at::empty({n}, options);
  int64_t* cnt = counts.data_ptr<int64_t>();
  auto flags = no_flags(1, options);
  int64_t* first_bad = flags.data_ptr<int64_t>();
  const int64_t num_entries = indices.numel();
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
    const int64_t v = node[i];
    int64_t c = 0;
    if (v < num_rows && !row_in_bounds(ptr[v], ptr[v + 1], num_entries)) {
      device::atomic_min(first_bad, i);
    } else if (v < num_rows) {
      for (int64_t p = ptr[v]; p < ptr[v + 1]; ++p) {
        c += device::hash_find(key, mask, static_cast<int64_t>(idx[p])) >= 0;
      }
    }
    cnt[i] = c;
  });
  check_rows_read(flags, nodes, indptr, num_entries);
  auto offsets = counts.cumsum(0) - counts;
  const int64_t total = n ? (offsets[n - 1] + counts[n - 1]).item<int64_t>() : 0;
  auto rows = at::empty({total}, options);
  auto cols = at::empty({total}, options);
  auto eids = at::empty({edge_ids ? total : 0}, options);
  const int64_t* off = offsets.data_ptr<int64_t>();
  const int64_t* eid = edge_ids ? edge_ids->data_ptr<int64_t>() : nullptr;
  int64_t* r = rows.data_ptr<int64_t>();
  int64_t* c = cols.data_ptr<int64_t>();
  int64_t* e = edge_ids ? eids.data_ptr<int64_t>() : nullptr;
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
    const int64_t v = node[i];
    if (v >= num_rows) return;
    int64_t o = off[i];
    for (int64_t p = ptr[v]; p < ptr[v + 1]; ++p) {
      const int64_t slot = device::hash_find(key, mask, static_cast<int64_t>(idx[p]));
      if (slot < 0) continue;
      r[o] = i;
      c[o] = val[slot];
      if (e) e[o] = eid[p];
      ++o;
    }
  });
  return {rows, cols, eids};
}

// Rows `ids` of a 2-D table (through `id2index` when given): row i of the
// output, or row positions[i] of `num_out_rows`: the one-part case of the
// unified table's gather (unified_gather.h).
template <typename scalar_t, typename Backend>
at::Tensor gather_rows_impl(const Backend& backend, const at::Tensor& table, const at::Tensor& ids,
                            const at::Tensor* id2index, const at::Tensor* positions,
                            int64_t num_out_rows) {
  PartTable parts{};
  parts.num = 1;
  parts.data[0] = table.data_ptr();
  parts.end[0] = table.size(0);
  return gather_part_rows<scalar_t>(backend, parts, table.size(1), ids, id2index, positions,
                                    num_out_rows, table.options());
}

// The ops for any backend: inputs checked (checks.h), then the kernel.

template <typename Backend>
std::tuple<at::Tensor, at::Tensor, at::Tensor> coo_to_csr(
    const Backend& backend, const at::Tensor& row, const at::Tensor& col, int64_t num_rows,
    int64_t num_cols, c10::optional<at::ScalarType> indices_dtype = {}) {
  const auto [rows, cols] = checked_coo_args(row, col, num_rows, num_cols);
  const auto dtype = checked_indices_dtype(indices_dtype, rows.numel(), num_cols);
  auto [indptr, indices, perm] = coo_to_csr_impl(backend, rows, cols, num_rows);
  return {indptr, indices.to(dtype), perm};
}

template <typename Backend>
at::Tensor has_edge(const Backend& backend, const at::Tensor& indptr, const at::Tensor& indices,
                    const at::Tensor& rows, const at::Tensor& cols) {
  const auto [r, c] = checked_edge_query_args(indptr, indices, rows, cols);
  return AT_DISPATCH_INDEX_TYPES(indptr.scalar_type(), "has_edge", [&] {
    return has_edge_impl<index_t>(backend, indptr, indices, r, c);
  });
}

template <typename Backend>
std::tuple<at::Tensor, at::Tensor> sample_negative(const Backend& backend, const at::Tensor& indptr,
                                                   const at::Tensor& indices,
                                                   const std::optional<at::Tensor>& fixed,
                                                   bool fixed_is_row, int64_t num_cols,
                                                   int64_t num_samples, int64_t trials,
                                                   bool padding, int64_t rng_seed) {
  const auto args =
      checked_negative_args(indptr, indices, fixed, fixed_is_row, num_cols, num_samples, trials);
  return AT_DISPATCH_INDEX_TYPES(indptr.scalar_type(), "sample_negative", [&] {
    return sample_negative_impl<index_t>(
        backend, indptr, indices, args.fixed.defined() ? &args.fixed : nullptr, fixed_is_row,
        args.num_rows, num_cols, args.num_samples, trials, padding, rng_seed);
  });
}

template <typename Backend>
std::tuple<at::Tensor, at::Tensor, at::Tensor> induced_subgraph(
    const Backend& backend, const at::Tensor& indptr, const at::Tensor& indices,
    const std::optional<at::Tensor>& edge_ids, const at::Tensor& nodes) {
  const auto node_t = checked_subgraph_args(indptr, indices, edge_ids, nodes);
  return AT_DISPATCH_INDEX_TYPES(indptr.scalar_type(), "induced_subgraph", [&] {
    return induced_subgraph_impl<index_t>(backend, indptr, indices,
                                          edge_ids.has_value() ? &*edge_ids : nullptr, node_t);
  });
}

template <typename Backend>
at::Tensor gather_rows(const Backend& backend, const at::Tensor& table, const at::Tensor& ids,
                       const std::optional<at::Tensor>& id2index,
                       const std::optional<at::Tensor>& positions, int64_t num_out_rows) {
  const auto args = checked_gather_args(table, ids, id2index, positions, num_out_rows);
  return AT_DISPATCH_ALL_TYPES_AND3(
      at::kHalf, at::kBFloat16, at::kBool, table.scalar_type(), "gather_rows", [&] {
        return gather_rows_impl<scalar_t>(
            backend, table, args.ids, args.id2index.defined() ? &args.id2index : nullptr,
            args.positions.defined() ? &args.positions : nullptr, num_out_rows);
      });
}

}  // namespace kernels
}  // namespace glt
