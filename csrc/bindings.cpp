// Python bindings of the graphlearn_torch extension (graphlearn_torch._C):
// its stateful objects and the pooled feature gather. The stateless kernels
// are dispatcher ops (torch.ops.glt.*, csrc/ops), registered when this
// module loads.
//
// Every binding goes through torch::wrap_pybind_function(_no_gil): a failed
// input check (c10::ValueError from TORCH_CHECK_VALUE) is turned into a
// Python ValueError inside the call, as torch's own bindings do, rather than
// left to pybind11's exception dispatch.
#include <ATen/ATen.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>

#include "cpu/runtime/buffer_pool.h"
#include "cpu/runtime/huge_pages.h"
#include "cpu/runtime/shared_file.h"
#include "cpu/features/gather.h"
#include "cpu/inducer/inducer.h"
#include "cpu/runtime/parallel.h"
#include "inducer_bindings.h"
#include "shm_queue.h"
#ifdef WITH_CUDA
#include "cuda/inducer.h"
#include "cuda/uva.h"
#endif

using torch::wrap_pybind_function;
using torch::wrap_pybind_function_no_gil;

namespace {

// The CPU gathers, the kernels' thread cap and arrays on huge pages.
void bind_cpu_functions(py::module_& m) {
  m.def("gather_rows", wrap_pybind_function_no_gil(&glt::cpu::gather_rows), py::arg("table"),
        py::arg("ids"), py::arg("id2index"), py::arg("pool") = nullptr,
        py::arg("positions") = py::none(), py::arg("num_out_rows") = -1);
  m.def("gather_partitioned_rows", wrap_pybind_function_no_gil(&glt::cpu::gather_partitioned_rows),
        py::arg("tables"), py::arg("id2index"), py::arg("ranks"), py::arg("offsets"),
        py::arg("parts"), py::arg("ids"), py::arg("pool") = nullptr, py::arg("out") = py::none());
  m.def("row_ranks", wrap_pybind_function_no_gil(&glt::cpu::row_ranks), py::arg("id2index"));
  m.def("empty_huge_pages", wrap_pybind_function(&glt::cpu::empty_huge_pages), py::arg("numel"),
        py::arg("dtype"));
  m.def("collapse_huge_pages", wrap_pybind_function_no_gil(&glt::cpu::collapse_huge_pages),
        py::arg("tensor"));
  m.def("map_shared_file", wrap_pybind_function(&glt::cpu::map_shared_file), py::arg("fd"),
        py::arg("nbytes"));
  m.def("kernel_threads", wrap_pybind_function(&glt::cpu::kernel_threads));
  m.def("kernel_thread_cap", wrap_pybind_function(&glt::cpu::kernel_thread_cap));
  m.def("set_kernel_thread_cap", wrap_pybind_function(&glt::cpu::set_kernel_thread_cap),
        py::arg("cap"));
  m.def("set_this_thread_kernel_threads",
        wrap_pybind_function(&glt::cpu::set_this_thread_kernel_threads), py::arg("threads"));
}

void bind_buffers(py::module_& m) {
  py::class_<glt::ShmReservation, std::shared_ptr<glt::ShmReservation>>(m, "ShmReservation")
      .def_property_readonly("views", wrap_pybind_function([](const glt::ShmReservation& self) {
                               return self.views();
                             }))
      .def("write",
           wrap_pybind_function_no_gil(
               [](glt::ShmReservation& self, int64_t index, const at::Tensor& tensor) {
                 self.write(index, tensor);
               }),
           py::arg("index"), py::arg("tensor"))
      .def("commit", wrap_pybind_function_no_gil([](glt::ShmReservation& self) { self.commit(); }))
      .def("abort", wrap_pybind_function_no_gil([](glt::ShmReservation& self) { self.abort(); }));

  py::class_<glt::cpu::BufferPool, std::shared_ptr<glt::cpu::BufferPool>>(m, "BufferPool")
      .def(py::init(wrap_pybind_function([](int64_t max_cached_bytes) {
             return std::make_shared<glt::cpu::BufferPool>(max_cached_bytes);
           })),
           py::arg("max_cached_bytes"))
      .def("clear", wrap_pybind_function([](glt::cpu::BufferPool& self) { self.clear(); }))
      .def_property_readonly("cached_bytes", wrap_pybind_function([](glt::cpu::BufferPool& self) {
                               return self.cached_bytes();
                             }));
}

void bind_inducers(py::module_& m) {
  py::class_<glt::cpu::Inducer> inducer(m, "Inducer");
  inducer.def(py::init(wrap_pybind_function([](int64_t num_node_types,
                                               const std::vector<int64_t>& num_nodes,
                                               int64_t disjoint_bits) {
                return std::make_unique<glt::cpu::Inducer>(num_node_types, num_nodes,
                                                           disjoint_bits);
              })),
              py::arg("num_node_types"), py::arg("num_nodes") = std::vector<int64_t>{},
              py::arg("disjoint_bits") = 0);
  const py::object batch_plan = glt::bind_batch_plan(m);
  glt::bind_inducer_methods(
      glt::bind_sample_batch(glt::bind_sample_induce_next(inducer), batch_plan));

#ifdef WITH_CUDA
  m.def("uva_view", wrap_pybind_function(&glt::cuda::uva_view), py::arg("host"), py::arg("device"));
  m.def("registered_view", wrap_pybind_function(&glt::cuda::registered_view), py::arg("host"),
        py::arg("device"));
  m.def("enable_peer_access", wrap_pybind_function(&glt::cuda::enable_peer_access),
        py::arg("device"), py::arg("peer"));
  py::class_<glt::cuda::CudaInducer> cuda_inducer(m, "CudaInducer");
  cuda_inducer.def(
      py::init(wrap_pybind_function([](int64_t num_node_types, int64_t device,
                                       int64_t disjoint_bits) {
        return std::make_unique<glt::cuda::CudaInducer>(num_node_types, device, disjoint_bits);
      })),
      py::arg("num_node_types"), py::arg("device"), py::arg("disjoint_bits") = 0);
  glt::bind_inducer_methods(glt::bind_launch_batch(
      glt::bind_sample_batch(glt::bind_sample_induce_next(cuda_inducer), batch_plan)));
#endif
}

void bind_shm_queue(py::module_& m) {
  py::class_<glt::ShmQueue, std::shared_ptr<glt::ShmQueue>>(m, "ShmQueue")
      .def(py::init(wrap_pybind_function_no_gil(&glt::ShmQueue::create)), py::arg("capacity"),
           py::arg("shm_size"))
      .def_static("attach", wrap_pybind_function_no_gil(&glt::ShmQueue::attach), py::arg("fd"))
      .def("reserve",
           wrap_pybind_function_no_gil([](glt::ShmQueue& self, const std::vector<std::string>& keys,
                                          const std::vector<at::Tensor>& templates,
                                          int64_t timeout_ms, const std::vector<bool>& elsewhere) {
             glt::ShmQueueStatus status = glt::ShmQueueStatus::kOk;
             std::string error;
             auto reservation =
                 self.reserve(keys, templates, elsewhere, timeout_ms, &status, &error);
             return std::make_tuple(static_cast<int>(status), std::move(error),
                                    std::move(reservation));
           }),
           py::arg("keys"), py::arg("templates"), py::arg("timeout_ms"),
           py::arg("elsewhere") = std::vector<bool>())
      .def("recv", wrap_pybind_function_no_gil([](glt::ShmQueue& self, int64_t timeout_ms) {
             auto msg = self.recv(timeout_ms);
             return std::make_tuple(static_cast<int>(msg.status), std::move(msg.error),
                                    std::move(msg.keys), std::move(msg.tensors));
           }),
           py::arg("timeout_ms"))
      .def("new_backing", wrap_pybind_function_no_gil(&glt::ShmQueue::new_backing),
           py::arg("keys"), py::arg("templates"), py::arg("elsewhere"))
      .def_static("message_bytes", wrap_pybind_function(&glt::ShmQueue::message_bytes),
                  py::arg("keys"), py::arg("tensors"))
      .def("empty",
           wrap_pybind_function_no_gil([](const glt::ShmQueue& self) { return self.empty(); }))
      .def("size",
           wrap_pybind_function_no_gil([](const glt::ShmQueue& self) { return self.size(); }))
      .def("free_bytes",
           wrap_pybind_function_no_gil([](const glt::ShmQueue& self) { return self.free_bytes(); }))
      .def("stats",
           wrap_pybind_function_no_gil([](const glt::ShmQueue& self) { return self.stats(); }))
      .def_property_readonly("capacity", &glt::ShmQueue::capacity)
      .def_property_readonly("shm_size", &glt::ShmQueue::shm_size)
      .def_property_readonly("backed_bytes", &glt::ShmQueue::backed_bytes)
      .def_property_readonly("waiting_for_room", &glt::ShmQueue::waiting_for_room)
      .def_property_readonly("fd", &glt::ShmQueue::fd)
      .def_property_readonly("mapping_address", &glt::ShmQueue::mapping_address)
      .def_property_readonly("mapping_size", &glt::ShmQueue::mapping_size);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "graphlearn_torch C++ kernels";
  bind_cpu_functions(m);
  bind_buffers(m);
  bind_inducers(m);
  bind_shm_queue(m);
}
