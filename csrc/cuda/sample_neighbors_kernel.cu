// glt::sample_neighbors on CUDA (see csrc/ops/sample_neighbors.cpp): one
// thread per seed, Philox streams (csrc/kernels/sample_neighbors.h).
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/sample_neighbors.h"
#include "cuda/backend.cuh"

namespace glt {
namespace cuda {

std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_neighbors_kernel(
    const at::Tensor& indptr, const at::Tensor& indices, const std::optional<at::Tensor>& edge_ids,
    const std::optional<at::Tensor>& edge_weights, const at::Tensor& seeds, int64_t num_neighbors,
    bool replace, int64_t rng_seed) {
  const c10::cuda::CUDAGuard guard(indptr.device());
  return kernels::sample_neighbors(CudaBackend{}, indptr, indices, edge_ids, edge_weights, seeds,
                                   num_neighbors, replace, rng_seed);
}

TORCH_LIBRARY_IMPL(glt, CUDA, m) { m.impl("sample_neighbors", TORCH_FN(sample_neighbors_kernel)); }

}  // namespace cuda
}  // namespace glt
