// glt::bucket_by_partition on CUDA (see csrc/ops/bucket_by_partition.cpp):
// a stable sort by partition, the counts from atomic adds
// (csrc/kernels/partition_ops.h).
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/partition_ops.h"
#include "cuda/backend.cuh"

namespace glt {
namespace cuda {

std::tuple<at::Tensor, at::Tensor> bucket_by_partition_kernel(const at::Tensor& partitions,
                                                              int64_t num_partitions) {
  const c10::cuda::CUDAGuard guard(partitions.device());
  return kernels::bucket_by_partition(CudaBackend{}, partitions, num_partitions);
}

TORCH_LIBRARY_IMPL(glt, CUDA, m) {
  m.impl("bucket_by_partition", TORCH_FN(bucket_by_partition_kernel));
}

}  // namespace cuda
}  // namespace glt
