// glt::unified_gather(parts, ids, id2index?, first_bad?) -> rows
//
// Gathers rows `ids` (int64, through `id2index` when given) of one logical
// table split row-wise into `parts` (at most 16; part p holds the rows after
// those of parts 0..p-1), all 2-D with one width and dtype. On CUDA the parts
// may live in the GPU memory of any GPU the ids' GPU can read (peer access)
// or in pinned host memory seen through UVA (`uva_view`): the hot rows of a
// feature table on the GPU, the rest in host memory, read by one kernel. The
// rows land on the ids' device. An id without a row is an error naming it;
// or, given `first_bad` (one int64 on the ids' device, at least the number
// of ids), the position of the first such id is written there and the op
// reads nothing back: several gathers' checks read in one host sync.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def(
      "unified_gather(Tensor[] parts, Tensor ids, Tensor? id2index, Tensor(a!)? first_bad=None) "
      "-> Tensor");
}
