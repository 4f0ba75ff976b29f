// Unified virtual addressing: host memory that GPU kernels read in place.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace glt {
namespace cuda {

// A tensor on CUDA device `device` whose storage is the pinned host memory of
// `host` (read by kernels through UVA, over PCIe); it keeps `host` alive. The
// topology of a 'ZERO_COPY' graph and the cold rows of a feature table are
// such views.
at::Tensor uva_view(const at::Tensor& host, int64_t device);

// A tensor on CUDA device `device` over the host memory of `host` where it
// lies (shared memory a host's processes map, or a large table of this
// process's own): the pages of its storage registered with CUDA
// (cudaHostRegister, mapped and portable) for as long as a view of them
// lives, so no process copies them into pinned memory. Memory registered
// otherwise (pinned, a channel's) is viewed as it is. Raises where CUDA
// cannot register the memory (a read-only file mapping, for one).
at::Tensor registered_view(const at::Tensor& host, int64_t device);

// Lets kernels on `device` read the memory of `peer` (idempotent); returns
// whether the two GPUs can.
bool enable_peer_access(int64_t device, int64_t peer);

}  // namespace cuda
}  // namespace glt
