// Feature rows from a table split into parts that live in different memories
// (GPU memory of several GPUs, pinned host memory read through UVA), for any
// backend: a group of threads per row finds its row's part once and copies
// it in chunks (16 bytes where the rows and the memory allow, down to one
// element), each thread several chunks in flight at once.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "checks.h"
#include "kernels/device.h"

namespace glt {
namespace kernels {

constexpr int kMaxParts = 16;

// The parts of one logical table: part p holds rows [end[p - 1], end[p]).
struct PartTable {
  const void* data[kMaxParts];
  int64_t end[kMaxParts];
  int num;
};

// The part that holds logical row `row` (or -1 past the last), and the row's
// index within it.
GLT_HOST_DEVICE GLT_INLINE int locate_row(const PartTable& table, int64_t row, int64_t* local) {
  int64_t start = 0;
  for (int p = 0; p < table.num; ++p) {
    if (row < table.end[p]) {
      *local = row - start;
      return p;
    }
    start = table.end[p];
  }
  return -1;
}

// The units a row is copied in: 16, 8, 4, 2 or 1 bytes, as one load and
// one store.
struct alignas(16) Bytes16 {
  uint32_t x, y, z, w;
};
struct alignas(8) Bytes8 {
  uint32_t x, y;
};

// The widest copy unit (bytes) that divides a row's bytes and every base
// address: the parts' and the output's.
inline int copy_width(const PartTable& table, const void* out, int64_t row_bytes) {
  int width = 16;
  auto fits = [&](const void* p) { return reinterpret_cast<uintptr_t>(p) % width == 0; };
  while (width > 1) {
    bool all = row_bytes % width == 0 && fits(out);
    for (int p = 0; p < table.num; ++p) all = all && fits(table.data[p]);
    if (all) break;
    width /= 2;
  }
  return width;
}

// Units a thread copies at once: its loads are all in flight before its
// stores, after one lookup of its row.
constexpr int kUnitsInFlight = 4;

// The threads that copy one row: a power of two, enough that each copies
// at most kUnitsInFlight units at a time, and at most a warp. A row of 25
// units (100 floats) gets 8: each thread of a group loads a 16-byte unit
// of the same 128 bytes of the row at a time.
inline int row_group_bits(int64_t units) {
  int bits = 0;
  while (bits < 5 && (int64_t{kUnitsInFlight} << bits) < units) ++bits;
  return bits;
}

// Where an id's row is in a part table: map[v] (v itself without a map) for
// ids v in [0, num_ids), else -1 (no row). Other row sources (book_gather.h)
// have the same row().
struct MappedRows {
  const int64_t* map;
  int64_t num_ids;

  GLT_HOST_DEVICE int64_t row(int64_t v) const {
    return (v >= 0 && v < num_ids) ? (map ? map[v] : v) : -1;
  }
};

// Copies the rows of ids `id` (row i's where `rows` says, rows.row(id[i]))
// in units of `unit_t`, `units` of them a row: output row i, or row pos[i].
// A group of 2^group_bits threads copies a row, each thread every group-th
// unit, kUnitsInFlight at a time, the group's units of a round one aligned
// block of memory (a read through UVA then asks for whole 128-byte lines).
// An id without a row is left out and the first such index kept in
// *first_bad.
template <typename unit_t, typename Rows, typename Backend>
void copy_part_rows(const Backend& backend, const PartTable& table, int64_t units, int64_t n,
                    const int64_t* id, const Rows rows, const int64_t* pos, void* out,
                    int64_t* first_bad) {
  unit_t* dst = static_cast<unit_t*>(out);
  const int group_bits = row_group_bits(units);
  const int64_t group = int64_t{1} << group_bits;
  backend.for_each(n << group_bits, [=] GLT_HOST_DEVICE(int64_t k) {
    const int64_t i = k >> group_bits, lane = k & (group - 1);
    const int64_t row = rows.row(id[i]);
    int64_t local = 0;
    const int part = row < 0 ? -1 : locate_row(table, row, &local);
    if (part < 0) {
      if (lane == 0) device::atomic_min(first_bad, i);
      return;
    }
    const unit_t* src = static_cast<const unit_t*>(table.data[part]) + local * units;
    unit_t* to = dst + (pos ? pos[i] : i) * units;
    // The group's loads of a round cover one aligned block of the group's
    // bytes (whole 128-byte lines where it spans them), not the row's
    // first bytes on: lane l takes the units at positions l of the blocks
    // the row overlaps, skipping those before or past the row.
    const uintptr_t span = static_cast<uintptr_t>(group) * sizeof(unit_t);  // a power of 2
    const int64_t lead =
        static_cast<int64_t>((reinterpret_cast<uintptr_t>(src) & (span - 1)) / sizeof(unit_t));
    for (int64_t first = lane - lead; first < units; first += group * kUnitsInFlight) {
      unit_t held[kUnitsInFlight] = {};  // (each one stored is loaded first)
      GLT_UNROLL
      for (int q = 0; q < kUnitsInFlight; ++q) {
        const int64_t u = first + q * group;
        if (u >= 0 && u < units) held[q] = src[u];
      }
      GLT_UNROLL
      for (int q = 0; q < kUnitsInFlight; ++q) {
        const int64_t u = first + q * group;
        if (u >= 0 && u < units) to[u] = held[q];
      }
    }
  });
}

// The rows of `ids` (where `rows` says) of a part table of width `dim` into
// a new tensor with `options`: row i of the output, or row positions[i] of
// `num_out_rows`; the index of the first id without a row goes into `bad`
// (one int64 on the ids' device, at least the number of ids), its output
// row left unwritten.
template <typename scalar_t, typename Rows, typename Backend>
at::Tensor copy_rows_of(const Backend& backend, const PartTable& table, int64_t dim,
                        const at::Tensor& ids, const Rows& rows, const at::Tensor* positions,
                        int64_t num_out_rows, const at::TensorOptions& options,
                        const at::Tensor& bad) {
  const int64_t n = ids.numel();
  auto out = at::empty({positions ? num_out_rows : n, dim}, options);
  if (n == 0 || dim == 0) return out;
  const int64_t* id = ids.data_ptr<int64_t>();
  const int64_t* pos = positions ? positions->data_ptr<int64_t>() : nullptr;
  int64_t* first_bad = bad.data_ptr<int64_t>();
  void* dst = out.data_ptr();
  const int64_t row_bytes = dim * static_cast<int64_t>(sizeof(scalar_t));
  const int width = copy_width(table, dst, row_bytes);
  const int64_t units = row_bytes / width;
  const auto copy = [&](auto unit) {
    copy_part_rows<decltype(unit)>(backend, table, units, n, id, rows, pos, dst, first_bad);
  };
  switch (width) {
    case 16: copy(Bytes16{}); break;
    case 8: copy(Bytes8{}); break;
    case 4: copy(uint32_t{}); break;
    case 2: copy(uint16_t{}); break;
    default: copy(uint8_t{}); break;
  }
  return out;
}

// Rows `ids` of a part table of width `dim` (through `id2index` when given)
// into a new tensor with `options`: row i of the output, or row positions[i]
// of `num_out_rows`. Ids without a row are an error naming the first of them;
// given `bad_mark` (one int64 on the ids' device, at least the number of
// ids), the index of the first of them goes there instead and nothing is
// read back: the caller reads it when it likes (one host sync for several
// gathers), their output rows left unwritten.
template <typename scalar_t, typename Backend>
at::Tensor gather_part_rows(const Backend& backend, const PartTable& table, int64_t dim,
                            const at::Tensor& ids, const at::Tensor* id2index,
                            const at::Tensor* positions, int64_t num_out_rows,
                            const at::TensorOptions& options,
                            const at::Tensor* bad_mark = nullptr) {
  const int64_t n = ids.numel();
  const int64_t num_rows = table.num ? table.end[table.num - 1] : 0;
  const int64_t num_ids = id2index ? id2index->numel() : num_rows;
  const MappedRows rows{id2index ? id2index->data_ptr<int64_t>() : nullptr, num_ids};
  auto bad = bad_mark ? *bad_mark : at::full({1}, n, ids.options());
  auto out = copy_rows_of<scalar_t>(backend, table, dim, ids, rows, positions, num_out_rows,
                                    options, bad);
  if (bad_mark || n == 0 || dim == 0) return out;
  const int64_t first = bad.item<int64_t>();
  if (first < n) {
    const int64_t v = ids[first].item<int64_t>();
    TORCH_CHECK_VALUE(v >= 0 && v < num_ids, "id ", v, " is out of range [0, ", num_ids,
                      ") of the feature");
    TORCH_CHECK_VALUE(false, "id ", v, " has no feature row (id2index gives ",
                      (*id2index)[v].item<int64_t>(), " for a table of ", num_rows, " rows)");
  }
  return out;
}

// The checked PartTable of `parts` (2-D, contiguous, one dtype and width,
// on devices of the ids' device type), and its width.
inline PartTable part_table(const std::vector<at::Tensor>& parts, const at::Tensor& ids,
                            int64_t* dim) {
  TORCH_CHECK_VALUE(!parts.empty() && parts.size() <= static_cast<size_t>(kMaxParts),
                    "a unified table needs 1 to ", kMaxParts, " parts, got ", parts.size());
  const auto dtype = parts[0].scalar_type();
  *dim = parts[0].dim() == 2 ? parts[0].size(1) : -1;
  PartTable table{};
  table.num = static_cast<int>(parts.size());
  int64_t rows = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    const auto& part = parts[p];
    TORCH_CHECK_VALUE(part.dim() == 2 && part.size(1) == *dim && part.scalar_type() == dtype,
                      "the parts of a unified table must be 2-D with one width and dtype; part ", p,
                      " has shape ", part.sizes(), " and dtype ", part.scalar_type());
    TORCH_CHECK_VALUE(part.is_contiguous(), "part ", p, " of the unified table is not contiguous");
    TORCH_CHECK_VALUE(part.device().type() == ids.device().type(), "part ", p, " is on ",
                      part.device(), " but the ids on ", ids.device());
    rows += part.size(0);
    table.data[p] = part.data_ptr();
    table.end[p] = rows;
  }
  return table;
}

// Checks `first_bad` (where given): one contiguous int64 on the ids' device.
inline void check_first_bad(const std::optional<at::Tensor>& first_bad, const at::Tensor& ids) {
  if (!first_bad.has_value()) return;
  TORCH_CHECK_VALUE(first_bad->scalar_type() == at::kLong && first_bad->numel() == 1 &&
                        first_bad->is_contiguous(),
                    "first_bad must be one contiguous int64, got ", first_bad->scalar_type(),
                    " of shape ", first_bad->sizes());
  check_device(*first_bad, "first_bad", ids.device());
}

// The op for any backend: the parts (2-D, contiguous, one dtype and width,
// each on a device the backend's threads can read) and ids checked, then the
// gather; the rows land on the ids' device. Ids without a row raise, or
// with `first_bad` mark it (gather_part_rows).
template <typename Backend>
at::Tensor unified_gather(const Backend& backend, const std::vector<at::Tensor>& parts,
                          const at::Tensor& ids, const std::optional<at::Tensor>& id2index,
                          const std::optional<at::Tensor>& first_bad = std::nullopt) {
  check_index(ids, "ids");
  check_first_bad(first_bad, ids);
  int64_t dim = 0;
  const PartTable table = part_table(parts, ids, &dim);
  const auto id_t = ids.contiguous();
  at::Tensor map_t;
  if (id2index.has_value()) {
    check_index(*id2index, "id2index");
    check_device(*id2index, "id2index", ids.device());
    map_t = id2index->contiguous();
  }
  const auto options = parts[0].options().device(ids.device());
  return AT_DISPATCH_ALL_TYPES_AND3(
      at::kHalf, at::kBFloat16, at::kBool, parts[0].scalar_type(), "unified_gather", [&] {
        return gather_part_rows<scalar_t>(backend, table, dim, id_t,
                                          map_t.defined() ? &map_t : nullptr, nullptr, 0, options,
                                          first_bad.has_value() ? &*first_bad : nullptr);
      });
}

}  // namespace kernels
}  // namespace glt
