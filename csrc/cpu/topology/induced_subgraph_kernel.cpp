// The subgraph induced by a node set: every stored edge whose both ends are
// in the set, relabelled to the nodes' positions. Parallel over nodes.
#include <torch/library.h>

#include "checks.h"
#include "cpu/inducer/id_map.h"
#include "cpu/runtime/parallel.h"

namespace glt::cpu {
namespace {

template <typename index_t>
std::tuple<at::Tensor, at::Tensor, at::Tensor> induced_subgraph_typed(const at::Tensor& indptr,
                                                                      const at::Tensor& indices,
                                                                      const int64_t* eid,
                                                                      const at::Tensor& node_t,
                                                                      const IdMap& local) {
  const int64_t num_rows = indptr.numel() - 1;
  const int64_t n = node_t.numel();
  const int64_t* node = node_t.data_ptr<int64_t>();
  const index_t* ptr = indptr.data_ptr<index_t>();
  const index_t* idx = indices.data_ptr<index_t>();
  const auto options = node_t.options();

  std::vector<int64_t> offsets(n + 1, 0);
  FirstBad bad_row;
  glt::cpu::parallel_for(0, n, 256, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t v = node[i];
      if (v >= num_rows) continue;
      if (!row_in_bounds(ptr[v], ptr[v + 1], indices.numel())) {
        bad_row.note(i);
        continue;
      }
      int64_t cnt = 0;
      for (int64_t p = ptr[v]; p < ptr[v + 1]; ++p) cnt += local.find(idx[p]) >= 0;
      offsets[i + 1] = cnt;
    }
  });
  if (bad_row.any()) raise_bad_row(ptr, node[bad_row.position()], indices.numel());
  for (int64_t i = 0; i < n; ++i) offsets[i + 1] += offsets[i];
  const int64_t total = offsets[n];
  auto rows = at::empty({total}, options);
  auto cols = at::empty({total}, options);
  auto eids = at::empty({eid ? total : 0}, options);
  int64_t* r = rows.data_ptr<int64_t>();
  int64_t* c = cols.data_ptr<int64_t>();
  int64_t* e = eid ? eids.data_ptr<int64_t>() : nullptr;
  glt::cpu::parallel_for(0, n, 256, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t v = node[i];
      if (v >= num_rows) continue;
      int64_t o = offsets[i];
      for (int64_t p = ptr[v]; p < ptr[v + 1]; ++p) {
        const int64_t l = local.find(idx[p]);
        if (l < 0) continue;
        r[o] = i;
        c[o] = l;
        if (e) e[o] = eid[p];
        ++o;
      }
    }
  });
  return {rows, cols, eids};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> induced_subgraph_kernel(
    const at::Tensor& indptr, const at::Tensor& indices, const std::optional<at::Tensor>& edge_ids,
    const at::Tensor& nodes) {
  const auto node_t = checked_subgraph_args(indptr, indices, edge_ids, nodes);
  const int64_t* eid = edge_ids.has_value() ? edge_ids->data_ptr<int64_t>() : nullptr;
  const int64_t n = node_t.numel();
  const int64_t* node = node_t.data_ptr<int64_t>();
  IdMap local;
  local.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    bool inserted;
    local.insert(node[i], &inserted);
    TORCH_CHECK_VALUE(inserted, "nodes must be unique; ", node[i], " appears twice");
  }
  return AT_DISPATCH_INDEX_TYPES(indptr.scalar_type(), "induced_subgraph", [&] {
    return induced_subgraph_typed<index_t>(indptr, indices, eid, node_t, local);
  });
}

TORCH_LIBRARY_IMPL(glt, CPU, m) { m.impl("induced_subgraph", TORCH_FN(induced_subgraph_kernel)); }

}  // namespace glt::cpu
