// Feature rows of a distributed graph from the tables of the partitions held
// here, laid one after another as one part table, each id's row found through
// the partition book and its partition's own id map as it is copied: no map
// of every id into the combined table is made (8 bytes an id in each process
// that gathers), for any backend.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/List.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "checks.h"
#include "kernels/device.h"
#include "kernels/unified_gather.h"

namespace glt {
namespace kernels {

// Where id v's row is: its partition p = book[v] (v in [0, num_ids)); p
// held here in slot s = slot_of[p] (p in [0, num_partitions)): the first
// row of s's parts plus its row in s's table, map[s][v] (v - offset[s]
// without a map), which must lie in [0, count[s]); a partition held
// elsewhere (slot -1) reads row 0, a placeholder that its row fetched
// elsewhere replaces. Anything else is no row (-1).
template <typename book_t>
struct BookRows {
  const book_t* book;
  int64_t num_ids;
  const int32_t* slot_of;
  int64_t num_partitions;
  int num_slots;
  const int64_t* map[kMaxParts];
  int64_t map_size[kMaxParts];
  int64_t offset[kMaxParts];
  int64_t first[kMaxParts];
  int64_t count[kMaxParts];

  GLT_HOST_DEVICE int64_t row(int64_t v) const {
    if (v < 0 || v >= num_ids) return -1;
    const int64_t p = static_cast<int64_t>(book[v]);
    if (p < 0 || p >= num_partitions) return -1;
    const int s = slot_of[p];
    if (s == -1) return 0;
    if (s < 0 || s >= num_slots) return -1;
    int64_t local = v - offset[s];
    if (map[s] != nullptr) local = v < map_size[s] ? map[s][v] : -1;
    return local >= 0 && local < count[s] ? first[s] + local : -1;
  }
};

// What the op was given for the held partitions, checked: slot s owns the
// next slot_parts[s] parts, reads its ids' rows through slot_maps[s]
// (int64, on the ids' device) or as id - slot_offsets[s].
template <typename book_t>
BookRows<book_t> book_rows(const PartTable& table, const std::vector<int64_t>& slot_parts,
                           const c10::List<std::optional<at::Tensor>>& slot_maps,
                           const std::vector<int64_t>& slot_offsets, const at::Tensor& book,
                           const at::Tensor& slot_of, const at::Tensor& ids) {
  const size_t slots = slot_parts.size();
  TORCH_CHECK_VALUE(slots <= static_cast<size_t>(kMaxParts),
                    "unified_gather_by_book takes at most ", kMaxParts, " slots, got ", slots);
  TORCH_CHECK_VALUE(slot_maps.size() == slots && slot_offsets.size() == slots,
                    "unified_gather_by_book expects one map and offset per slot (", slots,
                    "), got ", slot_maps.size(), " and ", slot_offsets.size());
  BookRows<book_t> rows{};
  rows.book = book.data_ptr<book_t>();
  rows.num_ids = book.numel();
  rows.slot_of = slot_of.data_ptr<int32_t>();
  rows.num_partitions = slot_of.numel();
  rows.num_slots = static_cast<int>(slots);
  int next_part = 0;
  for (size_t s = 0; s < slots; ++s) {
    TORCH_CHECK_VALUE(slot_parts[s] >= 0 && next_part + slot_parts[s] <= table.num,
                      "slot_parts must split the ", table.num, " parts among the slots, got ",
                      at::IntArrayRef(slot_parts));
    rows.first[s] = next_part == 0 ? 0 : table.end[next_part - 1];
    next_part += static_cast<int>(slot_parts[s]);
    rows.count[s] = (next_part == 0 ? 0 : table.end[next_part - 1]) - rows.first[s];
    TORCH_CHECK_VALUE(slot_offsets[s] >= 0 && slot_offsets[s] <= book.numel(),
                      "slot_offsets must be first ids, in [0, ", book.numel(), "]; slot ", s,
                      " has ", slot_offsets[s]);
    rows.offset[s] = slot_offsets[s];
    rows.map[s] = nullptr;
    rows.map_size[s] = 0;
    const std::optional<at::Tensor> given = slot_maps.get(s);
    if (given.has_value()) {
      const at::Tensor& map = *given;
      check_index(map, "slot_maps");
      TORCH_CHECK_VALUE(map.dim() == 1 && map.is_contiguous(),
                        "slot_maps must be contiguous 1-D tensors, got shape ", map.sizes());
      check_device(map, "slot_maps", ids.device());
      rows.map[s] = map.data_ptr<int64_t>();
      rows.map_size[s] = map.numel();
    }
  }
  TORCH_CHECK_VALUE(next_part == table.num, "slot_parts must split the ", table.num,
                    " parts among the slots, got ", at::IntArrayRef(slot_parts));
  return rows;
}

// Raises what made id `ids[first]` rowless (its book entry, its slot, its
// partition's map), read back from the device.
template <typename book_t>
void raise_no_book_row(const BookRows<book_t>& rows, const at::Tensor& book,
                       const at::Tensor& slot_of,
                       const c10::List<std::optional<at::Tensor>>& maps,
                       const at::Tensor& ids, int64_t first) {
  const int64_t v = ids[first].item<int64_t>();
  TORCH_CHECK_VALUE(v >= 0 && v < rows.num_ids, "id ", v, " is out of range [0, ", rows.num_ids,
                    ") of the partition book");
  const int64_t p = book[v].item<int64_t>();
  TORCH_CHECK_VALUE(p >= 0 && p < rows.num_partitions, "the partition book gives id ", v,
                    " partition ", p, ", outside the ", rows.num_partitions, " partitions");
  const int64_t s = slot_of[p].item<int64_t>();
  TORCH_CHECK_VALUE(s >= -1 && s < rows.num_slots, "slot_of gives partition ", p, " slot ", s,
                    ", outside the ", rows.num_slots, " slots");
  TORCH_CHECK_VALUE(s >= 0, "id ", v, " of partition ", p,
                    " (held elsewhere) reads the placeholder row 0 of a table of no rows");
  const std::optional<at::Tensor> map = maps.get(s);
  const bool mapped = map.has_value() && v < rows.map_size[s];
  const int64_t local =
      map.has_value() ? (mapped ? (*map)[v].item<int64_t>() : -1) : v - rows.offset[s];
  TORCH_CHECK_VALUE(false, "id ", v, " has no feature row in partition ", p, "'s table (row ",
                    local, " of ", rows.count[s], ")");
}

// The op for any backend: the rows of `ids` from `parts`, the tables of the
// held partitions one after another (BookRows says where each id's row is),
// on the ids' device. Ids without a row raise, or with `first_bad` mark it
// (as unified_gather).
template <typename Backend>
at::Tensor unified_gather_by_book(const Backend& backend, const std::vector<at::Tensor>& parts,
                                  const std::vector<int64_t>& slot_parts,
                                  const c10::List<std::optional<at::Tensor>>& slot_maps,
                                  const std::vector<int64_t>& slot_offsets, const at::Tensor& book,
                                  const at::Tensor& slot_of, const at::Tensor& ids,
                                  const std::optional<at::Tensor>& first_bad = std::nullopt) {
  check_index(ids, "ids");
  check_first_bad(first_bad, ids);
  TORCH_CHECK_VALUE(at::isIntegralType(book.scalar_type(), /*includeBool=*/false) &&
                        book.dim() == 1,
                    "book must be a 1-D integer tensor, got ", book.scalar_type(), " of shape ",
                    book.sizes());
  check_device(book, "book", ids.device());
  TORCH_CHECK_VALUE(slot_of.scalar_type() == at::kInt && slot_of.dim() == 1,
                    "slot_of must be a 1-D int32 tensor, got ", slot_of.scalar_type(),
                    " of shape ", slot_of.sizes());
  check_device(slot_of, "slot_of", ids.device());
  int64_t dim = 0;
  const PartTable table = part_table(parts, ids, &dim);
  const auto id_t = ids.contiguous(), entries = book.contiguous(), slots = slot_of.contiguous();
  const auto options = parts[0].options().device(ids.device());
  const int64_t n = ids.numel();
  auto bad = first_bad.has_value() ? *first_bad : at::full({1}, n, ids.options());
  return AT_DISPATCH_INTEGRAL_TYPES(book.scalar_type(), "unified_gather_by_book", [&] {
    using entry_t = scalar_t;
    const auto rows =
        book_rows<entry_t>(table, slot_parts, slot_maps, slot_offsets, entries, slots, ids);
    at::Tensor out = AT_DISPATCH_ALL_TYPES_AND3(
        at::kHalf, at::kBFloat16, at::kBool, parts[0].scalar_type(), "unified_gather_by_book",
        [&] {
          return copy_rows_of<scalar_t>(backend, table, dim, id_t, rows, nullptr, 0, options,
                                        bad);
        });
    if (!first_bad.has_value() && n > 0 && dim > 0) {
      const int64_t first = bad.item<int64_t>();
      if (first < n) raise_no_book_row(rows, entries, slots, slot_maps, id_t, first);
    }
    return out;
  });
}

}  // namespace kernels
}  // namespace glt
