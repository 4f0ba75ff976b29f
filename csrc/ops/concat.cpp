// glt::concat(parts) -> Tensor
//
// The 1-D tensors `parts` (at least one, of one dtype and device) end to end,
// as torch.cat gives them. The CPU kernel copies on our parallel loops
// (csrc/cpu/parallel.h) instead of an OpenMP region, whose threads spin
// after it beside busy processes; the sampler joins its hops' nodes and edge
// ids with it.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) { m.def("concat(Tensor[] parts) -> Tensor"); }
