// glt::group_by_partition(book, ids, num_partitions) -> (order, counts, grouped_ids)
//
// bucket_by_partition of book[ids], with the ids in their groups' order too:
// `order` holds the positions of `ids` whose partition (`book[id]`) is 0, then
// those whose partition is 1, ..., each group in increasing order; `counts[p]`
// is the size of group p and `grouped_ids[k] = ids[order[k]]`. `book` is a 1-D
// integer tensor with one partition in [0, num_partitions) per id; `ids` a
// 1-D int64 tensor of ids in [0, book.numel()). One pass of lookups and the
// two passes of the counting sort, where the distributed sampler would
// otherwise index the book, sort and then index the ids once per partition.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def(
      "group_by_partition(Tensor book, Tensor ids, int num_partitions) -> (Tensor, Tensor, "
      "Tensor)");
}
