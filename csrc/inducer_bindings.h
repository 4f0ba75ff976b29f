// The Python methods every inducer shares, bound once for each class.
#pragma once

#include <torch/extension.h>

#include <optional>
#include <vector>

namespace glt {

// sample_induce_next (a hop drawn and added at once), for the inducers that
// have it.
template <typename T>
py::class_<T>& bind_sample_induce_next(py::class_<T>& cls) {
  return cls.def("sample_induce_next", torch::wrap_pybind_function_no_gil(&T::sample_induce_next),
                 py::arg("src_types"), py::arg("nbr_types"), py::arg("srcs"), py::arg("indptrs"),
                 py::arg("indices"), py::arg("edge_ids"), py::arg("edge_weights"),
                 py::arg("fanouts"), py::arg("replace"), py::arg("rng_seeds"),
                 py::arg("row_prefixes"), py::arg("col_prefixes"),
                 py::arg("edge_times") = std::vector<std::optional<at::Tensor>>{},
                 py::arg("seed_times") = std::vector<std::optional<at::Tensor>>{},
                 py::arg("last") = false);
}

// sample_batch (a whole batch drawn and added at once), for the inducers
// that have it (kernels/batch_sample.h).
template <typename T>
py::class_<T>& bind_sample_batch(py::class_<T>& cls) {
  return cls.def("sample_batch", torch::wrap_pybind_function_no_gil(&T::sample_batch),
                 py::arg("seeds"), py::arg("num_nodes"), py::arg("num_hops"),
                 py::arg("num_edge_types"), py::arg("hops"), py::arg("edge_types"),
                 py::arg("src_types"), py::arg("nbr_types"), py::arg("indptrs"),
                 py::arg("indices"), py::arg("edge_ids"), py::arg("edge_weights"),
                 py::arg("fanouts"), py::arg("replace"), py::arg("rng_seeds"),
                 py::arg("replay") = false);
}

// The methods an inducer (the CPU Inducer, its CUDA twin, the host harness's
// generic one) has in Python.
template <typename T>
void bind_inducer_methods(py::class_<T>& cls) {
  cls.def("init_nodes",
          torch::wrap_pybind_function_no_gil(
              [](T& self, const std::vector<at::Tensor>& seeds) { return self.init_nodes(seeds); }),
          py::arg("seeds"))
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
