// The CUDA kernels of graphlearn_torch, run on the CPU: every op and the
// inducer through the very code the CUDA build launches (csrc/kernels), with
// the host backend. The tests compile this module on the fly and compare it
// with the CPU kernels and brute force (test/test_kernel_bodies.py).
#include <omp.h>
#include <ATen/ATen.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>

#include "kernels/disjoint_keys.h"
#include "kernels/graph_ops.h"
#include "kernels/inducer.h"
#include "kernels/partition_ops.h"
#include "kernels/sample_partitioned.h"
#include "kernels/sample_neighbors.h"
#include "inducer_bindings.h"
#include "kernels/book_gather.h"
#include "kernels/unified_gather.h"
#include "testing/host_backend.h"

namespace {

using glt::testing::HostBackend;

// `count` numbers of Philox stream `stream` under key `seed`, from block
// `counter` on (each block gives two 64-bit numbers).
at::Tensor philox(int64_t seed, int64_t stream, int64_t counter, int64_t count) {
  glt::kernels::device::Philox rng(static_cast<uint64_t>(seed), static_cast<uint64_t>(stream),
                          static_cast<uint64_t>(counter));
  auto out = at::empty({count}, at::kLong);
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<int64_t>(rng.next64());
  return out;
}

using HostInducer = glt::kernels::InducerImpl<HostBackend>;

c10::List<std::optional<at::Tensor>> as_list(const std::vector<std::optional<at::Tensor>>& v) {
  c10::List<std::optional<at::Tensor>> out;
  for (const auto& t : v) out.push_back(t);
  return out;
}

// One BatchSampling launched for the batch of `plan` (an inducer's
// BatchPlan) with `seeds` and `rng_seeds`, then again for each of
// `more_seeds` with `more_keys` (refill), as a CUDA graph of it replays:
// each batch's outputs, copied out.
std::vector<glt::kernels::BatchOutputs> sample_batches_relaunched(
    const glt::kernels::BatchPlan& batch_plan, std::vector<at::Tensor> seeds,
    std::vector<int64_t> rng_seeds, const std::vector<std::vector<at::Tensor>>& more_seeds,
    const std::vector<std::vector<int64_t>>& more_keys) {
  namespace k = glt::kernels;
  TORCH_CHECK_VALUE(more_seeds.size() == more_keys.size(), "one key list per seed list");
  k::BatchPlan plan = glt::batch_of(batch_plan, std::move(seeds), std::move(rng_seeds));
  const auto options = at::TensorOptions().dtype(at::kLong);
  std::vector<k::IdTable> tables(plan.seeds.size());
  for (auto& table : tables) k::allocate_table(table, k::device::table_capacity(0), options);
  for (auto& s : plan.seeds) s = s.clone();  // the batch's own inputs, as a graph's
  k::BatchSampling<HostBackend> batch(HostBackend{}, tables, options, std::move(plan));
  std::vector<k::BatchOutputs> outs;
  const auto forget = [] {};
  batch.launch();
  outs.push_back(batch.finish(forget, /*copy_out=*/true));
  for (size_t b = 0; b < more_seeds.size(); ++b) {
    batch.refill(more_seeds[b], more_keys[b]);
    batch.launch();
    outs.push_back(batch.finish(forget, /*copy_out=*/true));
  }
  return outs;
}

// The partition ops (kernels/partition_ops.h, kernels/sample_partitioned.h).
void bind_partition_ops(py::module& m) {
  m.def("bucket_by_partition",
        torch::wrap_pybind_function([](const at::Tensor& partitions, int64_t num_partitions) {
          return glt::kernels::bucket_by_partition(HostBackend{}, partitions, num_partitions);
        }));
  m.def("group_by_partition", torch::wrap_pybind_function([](const at::Tensor& book,
                                                             const at::Tensor& ids,
                                                             int64_t num_partitions) {
          return glt::kernels::group_by_partition(HostBackend{}, book, ids, num_partitions);
        }));
  m.def("scatter_rows_", torch::wrap_pybind_function([](at::Tensor out, const at::Tensor& positions,
                                                        const at::Tensor& rows) {
          return glt::kernels::scatter_rows_(HostBackend{}, out, positions, rows);
        }));
  m.def("stitch_neighbors",
        torch::wrap_pybind_function([](int64_t num_seeds, const std::vector<at::Tensor>& positions,
                                       const std::vector<at::Tensor>& nbr_nums,
                                       const std::vector<at::Tensor>& nbrs,
                                       const std::vector<at::Tensor>& edges) {
          return glt::kernels::stitch_neighbors(HostBackend{}, num_seeds, positions, nbr_nums,
                                                nbrs, edges);
        }));
  m.def("sample_neighbors_partitioned",
        torch::wrap_pybind_function([](const std::vector<std::optional<at::Tensor>>& indptrs,
                                       const std::vector<std::optional<at::Tensor>>& indices,
                                       const std::vector<std::optional<at::Tensor>>& edge_ids,
                                       const std::vector<std::optional<at::Tensor>>& edge_weights,
                                       const at::Tensor& parts, const at::Tensor& seeds,
                                       int64_t num_neighbors, bool replace,
                                       const std::vector<int64_t>& rng_seeds) {
          return glt::kernels::sample_neighbors_partitioned(
              HostBackend{}, as_list(indptrs), as_list(indices), as_list(edge_ids),
              as_list(edge_weights), parts, seeds, num_neighbors, replace, rng_seeds);
        }));
}

// The sampling ops' bodies: sample_neighbors, its temporal form, disjoint_keys.
void bind_sampling_ops(py::module& m) {
  m.def("sample_neighbors",
        torch::wrap_pybind_function([](const at::Tensor& indptr, const at::Tensor& indices,
                                       const std::optional<at::Tensor>& edge_ids,
                                       const std::optional<at::Tensor>& edge_weights,
                                       const at::Tensor& seeds, int64_t k, bool replace,
                                       int64_t rng_seed) {
          return glt::kernels::sample_neighbors(HostBackend{}, indptr, indices, edge_ids,
                                                edge_weights, seeds, k, replace, rng_seed);
        }));
  m.def(
      "sample_neighbors_temporal",
      torch::wrap_pybind_function(
          [](const at::Tensor& indptr, const at::Tensor& indices,
             const std::optional<at::Tensor>& edge_ids,
             const std::optional<at::Tensor>& edge_weights, const at::Tensor& edge_time,
             const at::Tensor& seeds, const at::Tensor& seed_time, int64_t k, bool replace,
             bool last, int64_t rng_seed, const std::optional<at::Tensor>& row_max_time) {
            return glt::kernels::sample_neighbors_temporal(HostBackend{}, indptr, indices,
                                                           edge_ids, edge_weights, edge_time, seeds,
                                                           seed_time, k, replace, last, rng_seed,
                                                           row_max_time);
          }),
      py::arg("indptr"), py::arg("indices"), py::arg("edge_ids"), py::arg("edge_weights"),
      py::arg("edge_time"), py::arg("seeds"), py::arg("seed_time"), py::arg("k"),
      py::arg("replace"), py::arg("last"), py::arg("rng_seed"),
      py::arg("row_max_time") = py::none());
  m.def("disjoint_keys", torch::wrap_pybind_function([](const at::Tensor& seed_keys,
                                                        const at::Tensor& nbrs,
                                                        const at::Tensor& nbr_nums, int64_t bits) {
          return glt::kernels::disjoint_keys(HostBackend{}, seed_keys, nbrs, nbr_nums, bits);
        }));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "graphlearn_torch's CUDA kernel bodies run on the host (tests only)";
  m.def("set_num_threads", [](int n) { omp_set_num_threads(n); });
  m.def("launches", [] { return HostBackend::launches().load(); });
  m.def("sample_batches_relaunched", torch::wrap_pybind_function(&sample_batches_relaunched),
        py::arg("plan"), py::arg("seeds"), py::arg("rng_seeds"), py::arg("more_seeds"),
        py::arg("more_keys"));
  m.def("philox", &philox, py::arg("seed"), py::arg("stream"), py::arg("counter"),
        py::arg("count"));
  bind_sampling_ops(m);
  m.def("coo_to_csr", torch::wrap_pybind_function([](const at::Tensor& row, const at::Tensor& col,
                                                     int64_t num_rows, int64_t num_cols) {
          return glt::kernels::coo_to_csr(HostBackend{}, row, col, num_rows, num_cols);
        }));
  m.def("has_edge",
        torch::wrap_pybind_function([](const at::Tensor& indptr, const at::Tensor& indices,
                                       const at::Tensor& rows, const at::Tensor& cols) {
          return glt::kernels::has_edge(HostBackend{}, indptr, indices, rows, cols);
        }));
  m.def("sample_negative",
        torch::wrap_pybind_function([](const at::Tensor& indptr, const at::Tensor& indices,
                                       const std::optional<at::Tensor>& fixed, bool fixed_is_row,
                                       int64_t num_cols, int64_t num_samples, int64_t trials,
                                       bool padding, int64_t rng_seed) {
          return glt::kernels::sample_negative(HostBackend{}, indptr, indices, fixed, fixed_is_row,
                                               num_cols, num_samples, trials, padding, rng_seed);
        }));
  m.def("induced_subgraph",
        torch::wrap_pybind_function([](const at::Tensor& indptr, const at::Tensor& indices,
                                       const std::optional<at::Tensor>& edge_ids,
                                       const at::Tensor& nodes) {
          return glt::kernels::induced_subgraph(HostBackend{}, indptr, indices, edge_ids, nodes);
        }));
  m.def("gather_rows", torch::wrap_pybind_function(
                           [](const at::Tensor& table, const at::Tensor& ids,
                              const std::optional<at::Tensor>& id2index,
                              const std::optional<at::Tensor>& positions, int64_t num_out_rows) {
                             return glt::kernels::gather_rows(HostBackend{}, table, ids, id2index,
                                                              positions, num_out_rows);
                           }));
  m.def("unified_gather",
        torch::wrap_pybind_function([](const std::vector<at::Tensor>& parts, const at::Tensor& ids,
                                       const std::optional<at::Tensor>& id2index,
                                       const std::optional<at::Tensor>& first_bad) {
          return glt::kernels::unified_gather(HostBackend{}, parts, ids, id2index, first_bad);
        }),
        py::arg("parts"), py::arg("ids"), py::arg("id2index") = py::none(),
        py::arg("first_bad") = py::none());
  m.def("unified_gather_by_book",
        torch::wrap_pybind_function(
            [](const std::vector<at::Tensor>& parts, const std::vector<int64_t>& slot_parts,
               const std::vector<std::optional<at::Tensor>>& slot_maps,
               const std::vector<int64_t>& slot_offsets, const at::Tensor& book,
               const at::Tensor& slot_of, const at::Tensor& ids,
               const std::optional<at::Tensor>& first_bad) {
              return glt::kernels::unified_gather_by_book(HostBackend{}, parts, slot_parts,
                                                          as_list(slot_maps), slot_offsets, book,
                                                          slot_of, ids, first_bad);
            }),
        py::arg("parts"), py::arg("slot_parts"), py::arg("slot_maps"), py::arg("slot_offsets"),
        py::arg("book"), py::arg("slot_of"), py::arg("ids"), py::arg("first_bad") = py::none());
  bind_partition_ops(m);
  py::class_<HostInducer> inducer(m, "Inducer");
  inducer.def(py::init(torch::wrap_pybind_function([](int64_t num_node_types,
                                                      int64_t disjoint_bits) {
                return std::make_unique<HostInducer>(num_node_types, HostBackend{},
                                                     at::TensorOptions(), disjoint_bits);
              })),
              py::arg("num_node_types"), py::arg("disjoint_bits") = 0);
  glt::bind_inducer_methods(glt::bind_launch_batch(
      glt::bind_sample_batch(glt::bind_sample_induce_next(inducer), glt::bind_batch_plan(m))));
}
