// Feature-row gathers on the CPU that are more than a dispatcher op: the
// pooled gather of one table, the gather from the tables of the partitions
// on this host, and the row ranks of an id-to-row map.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <vector>

namespace glt::cpu {

class BufferPool;

// Gathers rows `ids` of a 2-D table (through `id2index` when given), into a
// buffer from `pool` when one is given. With `positions`, the output has
// `num_out_rows` rows and row `ids[i]` lands at row `positions[i]` (the
// other rows are left for the caller to fill).
at::Tensor gather_rows(const at::Tensor& table, const at::Tensor& ids,
                       const std::optional<at::Tensor>& id2index,
                       const std::shared_ptr<BufferPool>& pool,
                       const std::optional<at::Tensor>& positions, int64_t num_out_rows);

// Rows of `ids` from the tables of the partitions on this host, without
// grouping them by partition: row i is row r of tables[p], p = parts[i],
// where r comes from ranks[p] (row_ranks) when given, else
// id2index[p][ids[i]], else ids[i] - offsets[p]. The rows of ids whose
// partition has no table are left for the caller to fill. Into `out` when
// given, else into a buffer from `pool` when one is given; nothing is
// written when an id has no row.
at::Tensor gather_partitioned_rows(const std::vector<std::optional<at::Tensor>>& tables,
                                   const std::vector<std::optional<at::Tensor>>& id2index,
                                   const std::vector<std::optional<at::Tensor>>& ranks,
                                   const std::vector<int64_t>& offsets, const at::Tensor& parts,
                                   const at::Tensor& ids, const std::shared_ptr<BufferPool>& pool,
                                   const std::optional<at::Tensor>& out);

// The row ranks of an id-to-row map (-1: no row) whose present ids have the
// rows 0, 1, 2, ... in id order: [ceil(n / 64), 2] int64, per word of 64
// ids the rows before it and the bits of the ids present (row_ranks.h
// reads them). None when the rows are not in id order.
std::optional<at::Tensor> row_ranks(const at::Tensor& id2index);

}  // namespace glt::cpu
