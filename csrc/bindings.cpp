// Python bindings of the graphlearn_torch extension (graphlearn_torch._C).
#include <torch/extension.h>

#include "cpu/buffer_pool.h"
#include "cpu/ops.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "graphlearn_torch C++ kernels";
  m.def("coo_to_csr", &glt::coo_to_csr, py::arg("row"), py::arg("col"),
        py::arg("num_rows"), py::arg("num_cols"),
        py::call_guard<py::gil_scoped_release>());
  m.def("sample_neighbors", &glt::sample_neighbors, py::arg("indptr"),
        py::arg("indices"), py::arg("edge_ids"), py::arg("edge_weights"),
        py::arg("seeds"), py::arg("num_neighbors"), py::arg("replace"),
        py::arg("rng_seed"), py::call_guard<py::gil_scoped_release>());
  m.def("gather_rows", &glt::gather_rows, py::arg("table"), py::arg("ids"),
        py::arg("id2index"), py::arg("pool") = nullptr,
        py::call_guard<py::gil_scoped_release>());
  py::class_<glt::BufferPool, std::shared_ptr<glt::BufferPool>>(m, "BufferPool")
      .def(py::init<int64_t>(), py::arg("max_cached_bytes"))
      .def("clear", &glt::BufferPool::clear)
      .def_property_readonly("cached_bytes", &glt::BufferPool::cached_bytes);
  py::class_<glt::Inducer>(m, "Inducer")
      .def(py::init<int64_t>(), py::arg("num_node_types"))
      .def("init_nodes", &glt::Inducer::init_nodes, py::arg("seeds"),
           py::call_guard<py::gil_scoped_release>())
      .def("induce_next", &glt::Inducer::induce_next, py::arg("src_types"),
           py::arg("nbr_types"), py::arg("srcs"), py::arg("nbrs"),
           py::arg("nbr_nums"), py::call_guard<py::gil_scoped_release>())
      .def("local_ids", &glt::Inducer::local_ids, py::arg("node_type"),
           py::arg("ids"))
      .def("reset", &glt::Inducer::reset)
      .def_property_readonly("num_node_types", &glt::Inducer::num_node_types);
}
