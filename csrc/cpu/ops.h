// CPU kernels of graphlearn_torch. The CUDA kernels (csrc/cuda) have the same
// signatures.
#pragma once

#include <ATen/ATen.h>

#include <memory>

#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace glt {

// Builds a compressed sparse layout from COO: rows are `row`, entries `col`.
// Returns (indptr [num_rows + 1], indices [E], perm [E]) where perm[i] is the
// input position of the i-th stored edge. Entries of a row are sorted by col.
std::tuple<at::Tensor, at::Tensor, at::Tensor> coo_to_csr(
    const at::Tensor& row, const at::Tensor& col, int64_t num_rows,
    int64_t num_cols);

// Samples up to `num_neighbors` neighbors of every seed (-1: all of them).
// Returns (neighbors, count per seed, edge ids of the sampled edges or an
// empty tensor when `edge_ids` is not given).
std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_neighbors(
    const at::Tensor& indptr, const at::Tensor& indices,
    const std::optional<at::Tensor>& edge_ids,
    const std::optional<at::Tensor>& edge_weights, const at::Tensor& seeds,
    int64_t num_neighbors, bool replace, int64_t rng_seed);

// Draws `num_samples` (row, col) pairs that are not edges, each with up to
// `trials` tries; with `fixed`, one pair per fixed row (or col, when
// `fixed_is_row` is false). Without `padding`, pairs whose tries all hit
// edges are dropped; with it they are kept.
std::tuple<at::Tensor, at::Tensor> sample_negative(const at::Tensor& indptr,
                                                   const at::Tensor& indices,
                                                   const std::optional<at::Tensor>& fixed,
                                                   bool fixed_is_row, int64_t num_cols,
                                                   int64_t num_samples,
                                                   int64_t trials, bool padding,
                                                   int64_t rng_seed);

// Whether (rows[i], cols[i]) is an edge, for every i (binary search in the
// sorted neighbor list of the row).
at::Tensor has_edge(const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& rows,
                    const at::Tensor& cols);

// The edges among `nodes` (unique ids): (local row, local col, edge ids).
std::tuple<at::Tensor, at::Tensor, at::Tensor> induced_subgraph(
    const at::Tensor& indptr, const at::Tensor& indices,
    const std::optional<at::Tensor>& edge_ids, const at::Tensor& nodes);

class BufferPool;

// Gathers rows `ids` of a 2-D table (through `id2index` when given), into a
// buffer from `pool` when one is given. With `positions`, the output has
// `num_out_rows` rows and row `ids[i]` lands at row `positions[i]` (the
// other rows are left for the caller to fill).
at::Tensor gather_rows(const at::Tensor& table, const at::Tensor& ids,
                       const std::optional<at::Tensor>& id2index,
                       const std::shared_ptr<BufferPool>& pool,
                       const std::optional<at::Tensor>& positions, int64_t num_out_rows);

// Maps global node ids to local ids, one id space per node type: a hash
// table, or, when the id range is known and small enough, an id-indexed
// array (one memory access per lookup, reset through the inserted ids).
class IdMap {
 public:
  IdMap();
  // Switches to an id-indexed array for ids in [0, num_ids).
  void use_dense(int64_t num_ids);
  // Local id of `key`; inserts it with the next local id if absent.
  int64_t insert(int64_t key, bool* inserted);
  // Local id of `key`, or -1.
  int64_t find(int64_t key) const;
  int64_t size() const { return size_; }
  void clear();
  void reserve(int64_t n);

 private:
  void grow();
  std::vector<int64_t> keys_;
  std::vector<int64_t> vals_;
  uint64_t mask_;
  int shift_;
  int64_t size_;
  std::vector<int32_t> dense_;         // id -> local id, -1 when absent
  std::vector<int64_t> dense_keys_;    // ids inserted since the last clear
};

// Deduplicates and relabels the nodes met while sampling several hops into
// one local id space per node type. A homogeneous graph has one node type.
class Inducer {
 public:
  // `num_nodes[t]` > 0 gives type t an id-indexed map over [0, num_nodes[t]).
  explicit Inducer(int64_t num_node_types, const std::vector<int64_t>& num_nodes = {});

  // Registers the seeds; returns them per type without duplicates, in order.
  std::vector<at::Tensor> init_nodes(const std::vector<at::Tensor>& seeds);

  // Adds one hop. For each sampled edge type e: seeds `srcs[e]` of type
  // `src_types[e]` (already known) with `nbr_nums[e]` neighbors each in
  // `nbrs[e]` of type `nbr_types[e]`. Returns (nodes new to each type, in
  // order of first appearance; local seed index per edge; local neighbor
  // index per edge).
  std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>,
             std::vector<at::Tensor>>
  induce_next(const std::vector<int64_t>& src_types,
              const std::vector<int64_t>& nbr_types,
              const std::vector<at::Tensor>& srcs,
              const std::vector<at::Tensor>& nbrs,
              const std::vector<at::Tensor>& nbr_nums);

  // Local ids of known nodes of type `node_type` (-1 for unknown ones).
  at::Tensor local_ids(int64_t node_type, const at::Tensor& ids) const;

  // Forgets all nodes, keeping the allocated memory for the next batch.
  void reset();
  int64_t num_node_types() const { return static_cast<int64_t>(maps_.size()); }

 private:
  void check_type(int64_t t) const;
  std::vector<IdMap> maps_;
};

}  // namespace glt
