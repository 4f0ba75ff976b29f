// glt::bucket_by_partition(partitions, num_partitions) -> (order, counts)
//
// A stable counting sort of positions by partition: `order` holds the
// positions of `partitions` whose value is 0, then those whose value is 1,
// ..., each group in increasing order; `counts[p]` is the size of group p.
// `partitions` is a 1-D integer tensor with values in [0, num_partitions).
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def("bucket_by_partition(Tensor partitions, int num_partitions) -> (Tensor, Tensor)");
}
