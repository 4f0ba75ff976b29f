// glt::unified_gather on the CPU (see csrc/ops/unified_gather.cpp): the
// generic kernel (csrc/kernels/unified_gather.h) over host parts.
#include <torch/library.h>

#include "kernels/unified_gather.h"
#include "cpu/runtime/backend.h"

namespace glt::cpu {

at::Tensor unified_gather_kernel(const at::TensorList parts, const at::Tensor& ids,
                                 const std::optional<at::Tensor>& id2index,
                                 const std::optional<at::Tensor>& first_bad) {
  return kernels::unified_gather(cpu::CpuBackend{}, parts.vec(), ids, id2index, first_bad);
}

TORCH_LIBRARY_IMPL(glt, CPU, m) { m.impl("unified_gather", TORCH_FN(unified_gather_kernel)); }

}  // namespace glt::cpu
