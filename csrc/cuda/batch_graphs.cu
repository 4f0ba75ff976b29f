// BatchGraphs (cuda/batch_graphs.h): whole batches captured and replayed as
// CUDA graphs.
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "cuda/backend.cuh"
#include "cuda/batch_graphs.h"

namespace glt {
namespace cuda {

namespace {

// Graphs kept at once (each holds its batch's buffers), and shapes
// remembered (a workload whose batches all differ in shape, whose
// remembered shapes are then forgotten now and then, never captures).
constexpr size_t kMaxBatchGraphs = 4;
constexpr size_t kMaxShapesSeen = 1024;

// What a captured graph bakes in: the counts, the requests, the
// topologies' addresses and sizes, and the partition books'.
std::vector<int64_t> batch_shape(const kernels::BatchPlan& plan) {
  const auto address = [](const std::optional<at::Tensor>& t) {
    return t.has_value() ? reinterpret_cast<int64_t>(t->data_ptr()) : int64_t{0};
  };
  std::vector<int64_t> shape{plan.num_types(), plan.num_hops, plan.num_edge_types,
                             plan.num_requests(), plan.replace,
                             static_cast<int64_t>(plan.rng_seeds.size())};
  for (const auto& seeds : plan.seeds) shape.push_back(seeds.numel());
  shape.insert(shape.end(), plan.num_nodes.begin(), plan.num_nodes.end());
  for (int64_t r = 0; r < plan.num_requests(); ++r) {
    shape.insert(shape.end(), {plan.hops[r], plan.edge_types[r], plan.src_types[r],
                               plan.nbr_types[r], plan.fanouts[r]});
  }
  for (size_t i = 0; i < plan.indptrs.size(); ++i) {  // each request's partitions'
    const at::Tensor& indptr = plan.indptrs[i];
    const at::Tensor& indices = plan.indices[i];
    shape.insert(shape.end(), {address(indptr), indptr.numel(),
                               static_cast<int64_t>(indptr.scalar_type()), address(indices),
                               indices.numel(), address(plan.edge_ids[i]),
                               address(plan.edge_weights[i])});
  }
  shape.push_back(plan.num_partitions);
  for (const auto& book : plan.books) {
    shape.insert(shape.end(), {address(book), book.numel(),
                               static_cast<int64_t>(book.scalar_type())});
  }
  return shape;
}

// Ends a capture left open on `stream` by a failure, dropping what it held.
void abandon_capture(const c10::cuda::CUDAStream& stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) == cudaSuccess &&
      status != cudaStreamCaptureStatusNone) {
    cudaGraph_t graph = nullptr;
    (void)cudaStreamEndCapture(stream, &graph);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
  }
  (void)cudaGetLastError();  // the failure was reported by the exception
}

}  // namespace

struct BatchGraphs::Captured {
  std::vector<kernels::IdTable> tables;
  std::unique_ptr<kernels::BatchSampling<CudaBackend>> batch;
  at::cuda::CUDAGraph graph;
};

BatchGraphs::BatchGraphs(const at::TensorOptions& options) : options_(options) {}

BatchGraphs::~BatchGraphs() = default;

kernels::BatchSampling<CudaBackend>* BatchGraphs::launch(const kernels::BatchPlan& plan) {
  if (failed_) return nullptr;
  const std::vector<int64_t> shape = batch_shape(plan);
  auto found = captured_.find(shape);
  if (found == captured_.end()) {
    if (seen_.size() >= kMaxShapesSeen) seen_.clear();
    if (seen_.insert(shape).second) return nullptr;
    std::unique_ptr<Captured> made = capture(plan);
    if (made == nullptr) return nullptr;
    if (captured_.size() >= kMaxBatchGraphs) captured_.clear();
    found = captured_.emplace(shape, std::move(made)).first;
  }
  Captured& captured = *found->second;
  for (const auto& seeds : plan.seeds) {
    TORCH_CHECK_VALUE(seeds.device() == options_.device() && seeds.scalar_type() == at::kLong,
                      "seeds must be int64 tensors on ", options_.device());
  }
  captured.batch->refill(plan.seeds, plan.rng_seeds);
  captured.graph.replay();
  captured.batch->read_back();
  return captured.batch.get();
}

std::unique_ptr<BatchGraphs::Captured> BatchGraphs::capture(const kernels::BatchPlan& plan) {
  auto captured = std::make_unique<Captured>();
  kernels::BatchPlan own = plan;
  for (auto& seeds : own.seeds) seeds = seeds.clone();  // the graph's inputs, refilled
  captured->tables.resize(plan.num_types());
  for (auto& table : captured->tables) {
    kernels::allocate_table(table, kernels::device::table_capacity(0), options_);
  }
  // Checks the plan and makes the buffers: before the capture, on this stream.
  captured->batch = std::make_unique<kernels::BatchSampling<CudaBackend>>(
      CudaBackend{}, captured->tables, options_, std::move(own));
  const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream();
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  at::cuda::CUDAEvent ready;
  ready.record(current);
  ready.block(side);
  try {
    const c10::cuda::CUDAStreamGuard guard(side);
    captured->graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
    captured->batch->launch();
    captured->graph.capture_end();
  } catch (const std::exception& e) {
    abandon_capture(side);
    failed_ = true;
    TORCH_WARN("graphlearn_torch: a sampled batch could not be captured as a CUDA graph (",
               e.what(), "); batches run without graphs from now on");
    return nullptr;
  }
  at::cuda::CUDAEvent captured_event;
  captured_event.record(side);
  captured_event.block(current);
  return captured;
}

}  // namespace cuda
}  // namespace glt
