// glt::sample_neighbors_temporal on CUDA (see
// csrc/ops/sample_neighbors_temporal.cpp): one thread per seed, its window
// found by binary search, Philox streams (csrc/kernels/sample_neighbors.h).
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/sample_neighbors.h"
#include "cuda/backend.cuh"

namespace glt {
namespace cuda {

std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_neighbors_temporal_kernel(
    const at::Tensor& indptr, const at::Tensor& indices, const std::optional<at::Tensor>& edge_ids,
    const std::optional<at::Tensor>& edge_weights, const at::Tensor& edge_time,
    const at::Tensor& seeds, const at::Tensor& seed_time, int64_t num_neighbors, bool replace,
    bool last, int64_t rng_seed, const std::optional<at::Tensor>& row_max_time) {
  const c10::cuda::CUDAGuard guard(indptr.device());
  return kernels::sample_neighbors_temporal(CudaBackend{}, indptr, indices, edge_ids, edge_weights,
                                            edge_time, seeds, seed_time, num_neighbors, replace,
                                            last, rng_seed, row_max_time);
}

TORCH_LIBRARY_IMPL(glt, CUDA, m) {
  m.impl("sample_neighbors_temporal", TORCH_FN(sample_neighbors_temporal_kernel));
}

}  // namespace cuda
}  // namespace glt
