// The Python methods every inducer shares, bound once for each class.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>
#include <vector>

#include "kernels/batch_sample.h"
#include "kernels/hop_plan.h"

namespace glt {

// A request's pieces (kernels::HopPieces) from sample_induce_next's
// `pieces`: None, or a list of None or a dict of indptrs, indices, edge_ids,
// edge_weights, rng_seeds, part and given (default False) per request.
inline std::vector<std::optional<kernels::HopPieces>> hop_pieces_of(const py::object& pieces) {
  std::vector<std::optional<kernels::HopPieces>> out;
  if (pieces.is_none()) return out;
  for (const py::handle item : pieces) {
    if (item.is_none()) {
      out.emplace_back();
      continue;
    }
    const auto d = item.cast<py::dict>();
    kernels::HopPieces p;
    p.indptrs = d["indptrs"].cast<std::vector<at::Tensor>>();
    p.indices = d["indices"].cast<std::vector<at::Tensor>>();
    p.edge_ids = d["edge_ids"].cast<std::vector<std::optional<at::Tensor>>>();
    p.edge_weights = d["edge_weights"].cast<std::vector<std::optional<at::Tensor>>>();
    p.rng_seeds = d["rng_seeds"].cast<std::vector<int64_t>>();
    p.part = d["part"].cast<at::Tensor>();
    p.given = d.attr("get")("given", false).cast<bool>();
    out.emplace_back(std::move(p));
  }
  return out;
}

// sample_induce_next (a hop drawn and added at once, kernels::HopPlan), for
// the inducers that have it.
template <typename T>
py::class_<T>& bind_sample_induce_next(py::class_<T>& cls) {
  using Tensors = std::vector<at::Tensor>;
  using Ints = std::vector<int64_t>;
  using Optionals = std::vector<std::optional<at::Tensor>>;
  return cls.def(
      "sample_induce_next",
      torch::wrap_pybind_function(
          [](T& self, Ints src_types, Ints nbr_types, Tensors srcs, Tensors indptrs,
             Tensors indices, Optionals edge_ids, Optionals edge_weights, Ints fanouts,
             bool replace, Ints rng_seeds, Tensors row_prefixes, Tensors col_prefixes,
             Optionals edge_times, Optionals seed_times, bool last, Optionals row_max_times,
             const py::object& pieces, bool fresh_on_host) {
            kernels::HopPlan plan{std::move(src_types),    std::move(nbr_types),
                                  std::move(srcs),         std::move(indptrs),
                                  std::move(indices),      std::move(edge_ids),
                                  std::move(edge_weights), std::move(fanouts),
                                  replace,                 std::move(rng_seeds),
                                  std::move(row_prefixes), std::move(col_prefixes),
                                  std::move(edge_times),   std::move(seed_times),
                                  std::move(row_max_times), last,
                                  hop_pieces_of(pieces),   fresh_on_host};
            const py::gil_scoped_release no_gil;
            return self.sample_induce_next(plan);
          }),
      py::arg("src_types"), py::arg("nbr_types"), py::arg("srcs"), py::arg("indptrs"),
      py::arg("indices"), py::arg("edge_ids"), py::arg("edge_weights"), py::arg("fanouts"),
      py::arg("replace"), py::arg("rng_seeds"), py::arg("row_prefixes"), py::arg("col_prefixes"),
      py::arg("edge_times") = Optionals{}, py::arg("seed_times") = Optionals{},
      py::arg("last") = false, py::arg("row_max_times") = Optionals{},
      py::arg("pieces") = py::none(), py::arg("fresh_on_host") = false);
}

// A batch's plan but its seeds and keys (kernels/batch_sample.h), made once
// for the batches that share topologies and fanouts, from keyword arguments:
// num_nodes, num_hops, num_edge_types, then per request hops, edge_types,
// src_types, nbr_types, indptrs, indices, edge_ids, edge_weights, fanouts;
// replace; over a host's partitions, num_partitions and books (the
// topologies then P per request). Checked when a batch starts.
inline kernels::BatchPlan batch_plan_of(const py::kwargs& kw) {
  using Tensors = std::vector<at::Tensor>;
  using Ints = std::vector<int64_t>;
  using Optionals = std::vector<std::optional<at::Tensor>>;
  kernels::BatchPlan plan;
  plan.num_nodes = kw["num_nodes"].cast<Ints>();
  plan.num_hops = kw["num_hops"].cast<int64_t>();
  plan.num_edge_types = kw["num_edge_types"].cast<int64_t>();
  plan.hops = kw["hops"].cast<Ints>();
  plan.edge_types = kw["edge_types"].cast<Ints>();
  plan.src_types = kw["src_types"].cast<Ints>();
  plan.nbr_types = kw["nbr_types"].cast<Ints>();
  plan.indptrs = kw["indptrs"].cast<Tensors>();
  plan.indices = kw["indices"].cast<Tensors>();
  plan.edge_ids = kw["edge_ids"].cast<Optionals>();
  plan.edge_weights = kw["edge_weights"].cast<Optionals>();
  plan.fanouts = kw["fanouts"].cast<Ints>();
  plan.replace = kw["replace"].cast<bool>();
  plan.num_partitions = kw.attr("get")("num_partitions", 1).cast<int64_t>();
  plan.books = kw.attr("get")("books", py::list()).cast<Tensors>();
  return plan;
}

// `plan` for one batch: its seeds by node type and its random keys.
inline kernels::BatchPlan batch_of(const kernels::BatchPlan& plan, std::vector<at::Tensor> seeds,
                                   std::vector<int64_t> rng_seeds) {
  kernels::BatchPlan batch = plan;
  batch.seeds = std::move(seeds);
  batch.rng_seeds = std::move(rng_seeds);
  return batch;
}

// The BatchPlan class (batch_plan_of's keyword arguments), registered once
// in module `m`: each inducer class with sample_batch holds it as its
// BatchPlan (bind_sample_batch).
inline py::object bind_batch_plan(py::module_& m) {
  return py::class_<kernels::BatchPlan>(m, "BatchPlan", py::module_local())
      .def(py::init(torch::wrap_pybind_function(
          [](const py::kwargs& kw) { return batch_plan_of(kw); })))
      .def_property_readonly("num_requests", &kernels::BatchPlan::num_requests);
}

// `batch_plan` (bind_batch_plan) as the inducer's BatchPlan, then
// sample_batch(plan, seeds, rng_seeds, replay=False): a whole batch drawn
// and added at once.
template <typename T>
py::class_<T>& bind_sample_batch(py::class_<T>& cls, const py::object& batch_plan) {
  cls.attr("BatchPlan") = batch_plan;
  using Tensors = std::vector<at::Tensor>;
  using Ints = std::vector<int64_t>;
  return cls.def("sample_batch",
                 torch::wrap_pybind_function_no_gil([](T& self, const kernels::BatchPlan& plan,
                                                       Tensors seeds, Ints rng_seeds, bool replay) {
                   return self.sample_batch(
                       batch_of(plan, std::move(seeds), std::move(rng_seeds)), replay);
                 }),
                 py::arg("plan"), py::arg("seeds"), py::arg("rng_seeds"),
                 py::arg("replay") = false);
}

// sample_batch in two calls, launch_batch(plan, seeds, rng_seeds,
// replay=False) then finish_batch(), for the inducers that have them.
template <typename T>
py::class_<T>& bind_launch_batch(py::class_<T>& cls) {
  using Tensors = std::vector<at::Tensor>;
  using Ints = std::vector<int64_t>;
  return cls
      .def("launch_batch",
           torch::wrap_pybind_function_no_gil([](T& self, const kernels::BatchPlan& plan,
                                                 Tensors seeds, Ints rng_seeds, bool replay) {
             self.launch_batch(batch_of(plan, std::move(seeds), std::move(rng_seeds)), replay);
           }),
           py::arg("plan"), py::arg("seeds"), py::arg("rng_seeds"), py::arg("replay") = false)
      .def("finish_batch",
           torch::wrap_pybind_function_no_gil([](T& self) { return self.finish_batch(); }));
}

// The methods an inducer (the CPU Inducer, its CUDA twin, the host harness's
// generic one) has in Python.
template <typename T>
void bind_inducer_methods(py::class_<T>& cls) {
  cls.def("init_nodes",
          torch::wrap_pybind_function_no_gil(
              [](T& self, const std::vector<at::Tensor>& seeds, bool distinct) {
                return self.init_nodes(seeds, distinct);
              }),
          py::arg("seeds"), py::arg("distinct") = false)
      .def("induce_next",
           torch::wrap_pybind_function_no_gil(
               [](T& self, const std::vector<int64_t>& src_types,
                  const std::vector<int64_t>& nbr_types, const std::vector<at::Tensor>& srcs,
                  const std::vector<at::Tensor>& nbrs, const std::vector<at::Tensor>& nbr_nums,
                  const std::vector<at::Tensor>& row_outs,
                  const std::vector<at::Tensor>& col_outs) {
                 return self.induce_next(src_types, nbr_types, srcs, nbrs, nbr_nums, row_outs,
                                         col_outs);
               }),
           py::arg("src_types"), py::arg("nbr_types"), py::arg("srcs"), py::arg("nbrs"),
           py::arg("nbr_nums"), py::arg("row_outs") = std::vector<at::Tensor>{},
           py::arg("col_outs") = std::vector<at::Tensor>{})
      .def("local_ids",
           torch::wrap_pybind_function_no_gil(
               [](const T& self, int64_t node_type, const at::Tensor& ids) {
                 return self.local_ids(node_type, ids);
               }),
           py::arg("node_type"), py::arg("ids"))
      .def("reset", torch::wrap_pybind_function([](T& self) { self.reset(); }))
      .def_property_readonly("num_node_types", torch::wrap_pybind_function([](const T& self) {
                               return self.num_node_types();
                             }));
}

}  // namespace glt
