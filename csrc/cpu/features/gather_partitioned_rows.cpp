// Feature rows of ids spread over the partitions of one host:
// out[i] = tables[parts[i]][row of ids[i]], written in order, where a
// partition's row comes from its row ranks (row_ranks.h), else its
// id2index[id], else id - offset. Ids of a partition without a table here
// (a remote one) leave their row for the caller. It replaces grouping the
// ids by partition and gathering each group into scattered output rows.
// Every id's row is looked up first, then the rows are copied: looked up
// between the copies, each lookup waits on the copies before it.
#include <ATen/Dispatch.h>

#include <atomic>
#include <cstring>
#include <memory>

#include "checks.h"
#include "cpu/runtime/buffer_pool.h"
#include "cpu/features/gather.h"
#include "cpu/runtime/parallel.h"
#include "cpu/features/row_ranks.h"

namespace glt::cpu {
namespace {

constexpr int64_t kPrefetchDistance = 8;
constexpr int64_t kPrefetchLines = 16;
constexpr int64_t kGrain = 256;

struct Part {
  const char* rows = nullptr;  // null: no table here
  int64_t num_rows = 0;
  const int64_t* ranks = nullptr;  // row ranks, first
  int64_t num_words = 0;
  const int64_t* id2index = nullptr;  // else this; null: row = id - offset
  int64_t num_ids = 0;
  int64_t offset = 0;
};

// The row of `id` in `part`, or -1.
inline int64_t row_of(const Part& part, int64_t id) {
  int64_t r;
  if (part.ranks) {
    r = ranked_row(part.ranks, part.num_words, id);
  } else if (part.id2index) {
    if (id < 0 || id >= part.num_ids) return -1;
    r = part.id2index[id];
  } else {
    r = id - part.offset;
  }
  return r >= 0 && r < part.num_rows ? r : -1;
}

// Where each id's row is: sources[i] points at it, or is null for an id of
// a partition without a table here (a remote one: the caller's). Raises
// (before anything is written) on an id with no row.
template <typename part_t>
void resolve(const std::vector<Part>& parts, const part_t* part_of, const int64_t* ids, int64_t n,
             int64_t row_bytes, const char** sources) {
  const int64_t num_parts = static_cast<int64_t>(parts.size());
  std::atomic<int64_t> first_bad{n};
  glt::cpu::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (i + kPrefetchDistance < end) {
        const int64_t p = part_of[i + kPrefetchDistance];
        const int64_t id = ids[i + kPrefetchDistance];
        if (p >= 0 && p < num_parts && id >= 0) {
          const Part& part = parts[p];
          if (part.ranks && (id >> 6) < part.num_words)
            __builtin_prefetch(part.ranks + 2 * (id >> 6));
          else if (!part.ranks && part.id2index && id < part.num_ids)
            __builtin_prefetch(part.id2index + id);
        }
      }
      const int64_t p = part_of[i];
      sources[i] = nullptr;
      if (p >= 0 && p < num_parts) {
        if (!parts[p].rows) continue;  // remote: the caller's
        const int64_t r = row_of(parts[p], ids[i]);
        if (r >= 0) {
          sources[i] = parts[p].rows + r * row_bytes;
          continue;
        }
      }
      int64_t cur = first_bad.load();
      while (i < cur && !first_bad.compare_exchange_weak(cur, i)) {
      }
    }
  });
  const int64_t bad = first_bad.load();
  if (bad < n) {
    const int64_t p = part_of[bad];
    TORCH_CHECK_VALUE(p >= 0 && p < num_parts, "id ", ids[bad], " is in partition ", p,
                      ", outside the ", num_parts, " partitions");
    if (num_parts == 1)  // one table: Feature.cpu_get's call
      TORCH_CHECK_VALUE(false, "id ", ids[bad], " has no feature row");
    TORCH_CHECK_VALUE(false, "id ", ids[bad], " has no feature row in partition ", p);
  }
}

// out[i] = *sources[i], for the non-null sources, with the rows a few ids
// ahead prefetched: the loop of gather_rows, its lookups done.
void copy_rows(const char* const* sources, int64_t n, int64_t row_bytes, char* out) {
  glt::cpu::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (i + kPrefetchDistance < end && sources[i + kPrefetchDistance]) {
        const char* src = sources[i + kPrefetchDistance];
        for (int64_t b = 0; b < row_bytes && b < kPrefetchLines * 64; b += 64)
          __builtin_prefetch(src + b);
      }
      if (sources[i]) std::memcpy(out + i * row_bytes, sources[i], row_bytes);
    }
  });
}

}  // namespace

at::Tensor gather_partitioned_rows(const std::vector<std::optional<at::Tensor>>& tables,
                                   const std::vector<std::optional<at::Tensor>>& id2index,
                                   const std::vector<std::optional<at::Tensor>>& ranks,
                                   const std::vector<int64_t>& offsets, const at::Tensor& parts,
                                   const at::Tensor& ids, const std::shared_ptr<BufferPool>& pool,
                                   const std::optional<at::Tensor>& out_arg) {
  const size_t num_parts = tables.size();
  TORCH_CHECK_VALUE(
      id2index.size() == num_parts && ranks.size() == num_parts && offsets.size() == num_parts,
      "gather_partitioned_rows expects tables, id2index, ranks and offsets of one length, got ",
      num_parts, ", ", id2index.size(), ", ", ranks.size(), " and ", offsets.size());
  check_index(ids, "ids");
  TORCH_CHECK_VALUE(ids.device().is_cpu(), "ids must be a CPU tensor");
  check_partition_of_each(parts, ids, "id");
  const at::Tensor* first = nullptr;
  for (const auto& t : tables) {
    if (t.has_value() && t->defined()) {
      first = &*t;
      break;
    }
  }
  TORCH_CHECK_VALUE(first != nullptr, "gather_partitioned_rows needs at least one table");
  std::vector<Part> plan(num_parts);
  std::vector<at::Tensor> keep;  // contiguous copies the plan points into
  for (size_t p = 0; p < num_parts; ++p) {
    if (!tables[p].has_value() || !tables[p]->defined()) continue;
    const at::Tensor& t = *tables[p];
    TORCH_CHECK_VALUE(t.device().is_cpu() && t.dim() == 2 && t.is_contiguous() &&
                          t.scalar_type() == first->scalar_type() && t.size(1) == first->size(1),
                      "the table of partition ", p, " must be a contiguous CPU [rows, ",
                      first->size(1), "] tensor of ", first->scalar_type(), ", got ", t.sizes(),
                      " ", t.scalar_type(), " on ", t.device());
    plan[p].rows = static_cast<const char*>(t.data_ptr());
    plan[p].num_rows = t.size(0);
    plan[p].offset = offsets[p];
    if (ranks[p].has_value() && ranks[p]->defined()) {
      const at::Tensor& rk = *ranks[p];
      TORCH_CHECK_VALUE(rk.device().is_cpu() && rk.scalar_type() == at::kLong && rk.dim() == 2 &&
                            rk.size(1) == 2,
                        "the row ranks of partition ", p,
                        " must be a CPU int64 [words, 2] tensor (row_ranks), got ",
                        rk.scalar_type(), " of shape ", rk.sizes(), " on ", rk.device());
      keep.push_back(rk.contiguous());
      plan[p].ranks = keep.back().data_ptr<int64_t>();
      plan[p].num_words = rk.size(0);
    } else if (id2index[p].has_value() && id2index[p]->defined()) {
      check_index(*id2index[p], "id2index");
      TORCH_CHECK_VALUE(id2index[p]->device().is_cpu(), "id2index must be a CPU tensor");
      keep.push_back(id2index[p]->contiguous());
      plan[p].id2index = keep.back().data_ptr<int64_t>();
      plan[p].num_ids = keep.back().numel();
    }
  }
  const auto id = ids.contiguous();
  const auto part_of = parts.contiguous();
  const int64_t n = id.numel();
  at::Tensor out;
  if (out_arg.has_value() && out_arg->defined()) {
    out = *out_arg;
    TORCH_CHECK_VALUE(out.device().is_cpu() && out.is_contiguous() &&
                          out.scalar_type() == first->scalar_type() && out.dim() == 2 &&
                          out.size(0) == n && out.size(1) == first->size(1),
                      "out must be a contiguous CPU [", n, ", ", first->size(1), "] tensor of ",
                      first->scalar_type(), ", got ", out.scalar_type(), " of shape ", out.sizes(),
                      " on ", out.device());
  } else {
    out = pool ? pool->empty({n, first->size(1)}, first->scalar_type())
               : at::empty({n, first->size(1)}, first->options());
  }
  const int64_t row_bytes = first->size(1) * first->element_size();
  if (n == 0 || row_bytes == 0) return out;
  std::unique_ptr<const char*[]> sources(new const char*[n]);  // resolve writes each
  AT_DISPATCH_INTEGRAL_TYPES(part_of.scalar_type(), "gather_partitioned_rows", [&] {
    resolve(plan, part_of.data_ptr<scalar_t>(), id.data_ptr<int64_t>(), n, row_bytes,
            sources.get());
  });
  copy_rows(sources.get(), n, row_bytes, static_cast<char*>(out.data_ptr()));
  return out;
}

}  // namespace glt::cpu
