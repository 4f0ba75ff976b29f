// glt::sample_negative on CUDA (see csrc/ops/sample_negative.cpp): one
// thread per pair, Philox streams.
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/graph_ops.h"
#include "cuda/backend.cuh"

namespace glt {
namespace cuda {

std::tuple<at::Tensor, at::Tensor> sample_negative_kernel(const at::Tensor& indptr,
                                                          const at::Tensor& indices,
                                                          const std::optional<at::Tensor>& fixed,
                                                          bool fixed_is_row, int64_t num_cols,
                                                          int64_t num_samples, int64_t trials,
                                                          bool padding, int64_t rng_seed) {
  const c10::cuda::CUDAGuard guard(indptr.device());
  return kernels::sample_negative(CudaBackend{}, indptr, indices, fixed, fixed_is_row, num_cols,
                                  num_samples, trials, padding, rng_seed);
}

TORCH_LIBRARY_IMPL(glt, CUDA, m) { m.impl("sample_negative", TORCH_FN(sample_negative_kernel)); }

}  // namespace cuda
}  // namespace glt
