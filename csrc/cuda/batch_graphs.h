// Whole batches replayed as CUDA graphs (CudaInducer::sample_batch with
// replay): a batch of the GPU sampler launches some forty small
// kernels, and launching them costs the host more than the GPU takes to run
// them. A batch whose shape (seed counts, fanouts, topologies) was met
// before is captured once as a CUDA graph over buffers of its own
// (kernels/batch_sample.h's BatchSampling, which every launch starts
// afresh), and each later batch of that shape copies in its seeds and random
// keys and replays the graph: one launch, and the one host sync at its end.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "cuda/backend.cuh"
#include "kernels/batch_sample.h"

namespace glt {
namespace cuda {

class BatchGraphs {
 public:
  explicit BatchGraphs(const at::TensorOptions& options);
  ~BatchGraphs();

  // The batch of `plan` launched by a graph of its shape (its seeds and
  // keys copied in, the graph replayed, its sizes' copy to the host
  // started), for the caller to finish (BatchSampling::finish, copying the
  // outputs out); valid until the next launch. A graph is captured at the
  // second batch of a shape (the first runs without, which also warms up
  // the kernels). Null where the caller runs the batch without: the first
  // batch of a shape, or every batch once a capture failed (with a
  // warning).
  kernels::BatchSampling<CudaBackend>* launch(const kernels::BatchPlan& plan);

 private:
  struct Captured;
  std::unique_ptr<Captured> capture(const kernels::BatchPlan& plan);

  at::TensorOptions options_;
  std::map<std::vector<int64_t>, std::unique_ptr<Captured>> captured_;
  std::set<std::vector<int64_t>> seen_;
  bool failed_ = false;
};

}  // namespace cuda
}  // namespace glt
