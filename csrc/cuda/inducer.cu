// CudaInducer: the multi-type inducer over GPU hash tables.
#include <c10/cuda/CUDAGuard.h>

#include <utility>

#include "kernels/inducer.h"
#include "cuda/backend.cuh"
#include "cuda/batch_graphs.h"
#include "cuda/inducer.h"

namespace glt {
namespace cuda {

struct CudaInducer::Impl {
  Impl(int64_t num_node_types, const at::TensorOptions& options, int64_t disjoint_bits)
      : inducer(num_node_types, CudaBackend{}, options, disjoint_bits), graphs(options) {}

  kernels::InducerImpl<CudaBackend> inducer;
  BatchGraphs graphs;
  // The batch a graph replayed, until finish_batch (owned by `graphs`).
  kernels::BatchSampling<CudaBackend>* replayed = nullptr;

  // Refuses `what` while a launched batch waits for finish_batch.
  void check_idle(const char* what) const { inducer.check_idle(what, replayed != nullptr); }
};

CudaInducer::CudaInducer(int64_t num_node_types, int64_t device, int64_t disjoint_bits)
    : device_(device) {
  const c10::cuda::CUDAGuard guard(device);
  impl_ = std::make_unique<Impl>(
      num_node_types, at::TensorOptions().device(at::kCUDA, device).dtype(at::kLong),
      disjoint_bits);
}

CudaInducer::~CudaInducer() = default;

std::vector<at::Tensor> CudaInducer::init_nodes(const std::vector<at::Tensor>& seeds,
                                                bool distinct) {
  const c10::cuda::CUDAGuard guard(device_);
  impl_->check_idle("init_nodes");
  return impl_->inducer.init_nodes(seeds, distinct);
}

std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>>
CudaInducer::induce_next(const std::vector<int64_t>& src_types,
                         const std::vector<int64_t>& nbr_types, const std::vector<at::Tensor>& srcs,
                         const std::vector<at::Tensor>& nbrs,
                         const std::vector<at::Tensor>& nbr_nums,
                         const std::vector<at::Tensor>& row_outs,
                         const std::vector<at::Tensor>& col_outs) {
  const c10::cuda::CUDAGuard guard(device_);
  impl_->check_idle("induce_next");
  return impl_->inducer.induce_next(src_types, nbr_types, srcs, nbrs, nbr_nums, row_outs, col_outs);
}

kernels::HopOutputs CudaInducer::sample_induce_next(const kernels::HopPlan& plan) {
  const c10::cuda::CUDAGuard guard(device_);
  impl_->check_idle("sample_induce_next");
  return impl_->inducer.sample_induce_next(plan);
}

kernels::BatchOutputs CudaInducer::sample_batch(kernels::BatchPlan plan, bool replay) {
  launch_batch(std::move(plan), replay);
  return finish_batch();
}

void CudaInducer::launch_batch(kernels::BatchPlan plan, bool replay) {
  const c10::cuda::CUDAGuard guard(device_);
  impl_->check_idle("launch_batch");
  if (replay) {
    impl_->replayed = impl_->graphs.launch(plan);
    if (impl_->replayed != nullptr) return;
  }
  impl_->inducer.launch_batch(std::move(plan));
}

kernels::BatchOutputs CudaInducer::finish_batch() {
  const c10::cuda::CUDAGuard guard(device_);
  if (impl_->replayed == nullptr) return impl_->inducer.finish_batch();
  auto* batch = std::exchange(impl_->replayed, nullptr);
  return batch->finish([this] { impl_->inducer.reset(); }, /*copy_out=*/true);
}

at::Tensor CudaInducer::local_ids(int64_t node_type, const at::Tensor& ids) const {
  const c10::cuda::CUDAGuard guard(device_);
  impl_->check_idle("local_ids");
  return impl_->inducer.local_ids(node_type, ids);
}

void CudaInducer::reset() {
  const c10::cuda::CUDAGuard guard(device_);
  impl_->replayed = nullptr;
  impl_->inducer.reset();
}

int64_t CudaInducer::num_node_types() const { return impl_->inducer.num_node_types(); }

}  // namespace cuda
}  // namespace glt
