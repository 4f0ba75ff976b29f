// glt::group_by_partition on CUDA (see csrc/ops/group_by_partition.cpp): the
// lookups and counts in one pass, then a stable sort by partition
// (csrc/kernels/partition_ops.h).
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/partition_ops.h"
#include "cuda/backend.cuh"

namespace glt {
namespace cuda {

std::tuple<at::Tensor, at::Tensor, at::Tensor> group_by_partition_kernel(const at::Tensor& book,
                                                                         const at::Tensor& ids,
                                                                         int64_t num_partitions) {
  const c10::cuda::CUDAGuard guard(ids.device());
  return kernels::group_by_partition(CudaBackend{}, book, ids, num_partitions);
}

TORCH_LIBRARY_IMPL(glt, CUDA, m) {
  m.impl("group_by_partition", TORCH_FN(group_by_partition_kernel));
}

}  // namespace cuda
}  // namespace glt
