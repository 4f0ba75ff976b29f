// glt::disjoint_keys on the CPU (see csrc/ops/disjoint_keys.cpp): the
// generic kernel (csrc/kernels/disjoint_keys.h), seeds in parallel.
#include <torch/library.h>

#include "kernels/disjoint_keys.h"
#include "cpu/runtime/backend.h"

namespace glt::cpu {

at::Tensor disjoint_keys_kernel(const at::Tensor& seed_keys, const at::Tensor& nbrs,
                                const at::Tensor& nbr_nums, int64_t bits) {
  return kernels::disjoint_keys(cpu::CpuBackend{}, seed_keys, nbrs, nbr_nums, bits);
}

TORCH_LIBRARY_IMPL(glt, CPU, m) { m.impl("disjoint_keys", TORCH_FN(disjoint_keys_kernel)); }

}  // namespace glt::cpu
