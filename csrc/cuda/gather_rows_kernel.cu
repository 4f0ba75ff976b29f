// glt::gather_rows on CUDA (see csrc/ops/gather_rows.cpp): a group of threads
// per row, each with several 16-byte units (or narrower ones) in flight.
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/graph_ops.h"
#include "cuda/backend.cuh"

namespace glt {
namespace cuda {

at::Tensor gather_rows_kernel(const at::Tensor& table, const at::Tensor& ids,
                              const std::optional<at::Tensor>& id2index,
                              const std::optional<at::Tensor>& positions, int64_t num_out_rows) {
  const c10::cuda::CUDAGuard guard(table.device());
  return kernels::gather_rows(CudaBackend{}, table, ids, id2index, positions, num_out_rows);
}

TORCH_LIBRARY_IMPL(glt, CUDA, m) { m.impl("gather_rows", TORCH_FN(gather_rows_kernel)); }

}  // namespace cuda
}  // namespace glt
