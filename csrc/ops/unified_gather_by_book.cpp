// glt::unified_gather_by_book(parts, slot_parts, slot_maps, slot_offsets, book, slot_of, ids,
//                             first_bad?) -> rows
//
// Gathers the feature rows of `ids` (int64) of a distributed graph from the
// tables of the partitions held here, laid one after another in `parts` (at
// most 16, as unified_gather's): held slot s owns the next slot_parts[s]
// parts. An id v's row: its partition p = book[v] (any integer dtype), p's
// slot slot_of[p] (int32; -1: held elsewhere, which reads row 0, a
// placeholder for the row fetched from there), then its row in that slot's
// table, slot_maps[s][v] (int64), or v - slot_offsets[s] without a map. No
// map of every id into the combined table is made. The rows land on the ids'
// device. An id without a row is an error naming it and why; or, given
// `first_bad` (one int64 on the ids' device, at least the number of ids),
// the position of the first such id is written there and nothing is read
// back.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def(
      "unified_gather_by_book(Tensor[] parts, int[] slot_parts, Tensor?[] slot_maps, "
      "int[] slot_offsets, Tensor book, Tensor slot_of, Tensor ids, Tensor(a!)? first_bad=None) "
      "-> Tensor");
}
