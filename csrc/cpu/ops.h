// The CPU side of graphlearn_torch that is more than a dispatcher op (those
// are declared by their schemas in csrc/ops and registered by their kernel
// files): the pooled feature gathers, and the inducer with its id maps.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace glt {

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

// The keys an IdMap inserted since its last clear, in order, in a buffer
// that grows by doubling and is not zeroed.
class KeyLog {
 public:
  // Room for n more keys at the end; they count as logged.
  int64_t* extend(int64_t n);
  void push_back(int64_t key) { *extend(1) = key; }
  const int64_t* data() const { return data_.get(); }
  int64_t size() const { return size_; }
  void clear() { size_ = 0; }
  // Drops the keys past the first n.
  void truncate(int64_t n) { size_ = std::min(size_, n); }
  void reserve(int64_t n);

 private:
  std::unique_ptr<int64_t[]> data_;
  int64_t size_ = 0;
  int64_t capacity_ = 0;
};

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
  // Inserts keys[0, n) in order: local[i] is the local id of keys[i]; the
  // keys new to the map get the next local ids in order of first
  // appearance. Checks the keys first (check_keys); an id-indexed map
  // inserts many keys on many threads in parallel, with the same result.
  void insert_all(const int64_t* keys, int64_t n, int64_t* local);
  // insert_all on this thread, of checked keys: called for consecutive
  // parts of a sequence, it inserts the whole sequence.
  void insert_in_order(const int64_t* keys, int64_t n, int64_t* local);
  // Whether insert_all inserts n keys in parallel.
  bool inserts_in_parallel(int64_t n) const;
  // Raises a ValueError naming the first key the map cannot hold.
  void check_keys(const int64_t* keys, int64_t n) const;
  // Local id of `key`, or -1.
  int64_t find(int64_t key) const;
  // The keys of local ids [first, size()), as a new tensor.
  at::Tensor keys_from(int64_t first) const;
  int64_t size() const { return size_; }
  void clear();
  void reserve(int64_t n);

 private:
  void grow();
  void insert_all_parallel(const int64_t* keys, int64_t n, int64_t* local);
  std::vector<int64_t> keys_;
  std::vector<int64_t> vals_;
  uint64_t mask_;
  int shift_;
  int64_t size_;
  // id -> local id; kAbsent when absent (and, inside insert_all, a claim
  // -1 - i by the first position i that holds the id)
  std::vector<int32_t> dense_;
  KeyLog inserted_;  // key of each local id, since the last clear
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
  // index per edge). The local indices are written into `row_outs[e]` and
  // `col_outs[e]` when given (as slices of buffers that hold every hop).
  std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>> induce_next(
      const std::vector<int64_t>& src_types, const std::vector<int64_t>& nbr_types,
      const std::vector<at::Tensor>& srcs, const std::vector<at::Tensor>& nbrs,
      const std::vector<at::Tensor>& nbr_nums, const std::vector<at::Tensor>& row_outs = {},
      const std::vector<at::Tensor>& col_outs = {});

  // Draws one hop and adds it, in one pass: each chunk of a request's draws
  // is inserted as soon as it is drawn (while other threads draw the next
  // chunks) where the inserts are sequential, below 4 threads. Request e
  // draws up to fanouts[e] neighbors (-1: all) of `srcs[e]` (of type
  // `src_types[e]`, already known) from the CSR topology (indptrs[e],
  // indices[e]), as the sample_neighbors op does with rng_seeds[e];
  // their type is nbr_types[e]. Returns (nodes new to each type, in order
  // of first appearance; row_prefixes[e] followed by the local seed index
  // of each edge drawn; col_prefixes[e] followed by their local neighbor
  // index; then per request sample_neighbors' outputs: the neighbors, the
  // neighbors per seed, the edge ids (empty without edge_ids[e])): the same
  // batch as sample_neighbors then induce_next. Everything is checked
  // before anything is inserted, but a neighbor id out of range (a corrupt
  // topology) may be met after part of the hop was inserted: the inducer
  // then forgets all nodes (reset) before it raises.
  std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>,
             std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>>
  sample_induce_next(const std::vector<int64_t>& src_types, const std::vector<int64_t>& nbr_types,
                     const std::vector<at::Tensor>& srcs, const std::vector<at::Tensor>& indptrs,
                     const std::vector<at::Tensor>& indices,
                     const std::vector<std::optional<at::Tensor>>& edge_ids,
                     const std::vector<std::optional<at::Tensor>>& edge_weights,
                     const std::vector<int64_t>& fanouts, bool replace,
                     const std::vector<int64_t>& rng_seeds,
                     const std::vector<at::Tensor>& row_prefixes,
                     const std::vector<at::Tensor>& col_prefixes);

  // Local ids of known nodes of type `node_type` (-1 for unknown ones).
  at::Tensor local_ids(int64_t node_type, const at::Tensor& ids) const;

  // Forgets all nodes, keeping the allocated memory for the next batch.
  void reset();
  int64_t num_node_types() const { return static_cast<int64_t>(maps_.size()); }

 private:
  void check_type(int64_t t) const;
  // Writes the local id of seed srcs[i] (of type t) at r[offsets[i],
  // offsets[i + 1]); `src` is srcs, contiguous.
  void write_rows(int64_t t, const at::Tensor& srcs, const at::Tensor& src, const int64_t* offsets,
                  int64_t* r) const;
  // The nodes each type added since it had first_fresh[t] (remembered).
  std::vector<at::Tensor> take_added(const std::vector<int64_t>& first_fresh);
  // Remembers `nodes` as the nodes type t just added, from local id `first`.
  void remember_added(int64_t t, const at::Tensor& nodes, int64_t first);
  // The local id of srcs[0] when `srcs` is, unchanged, the tensor of nodes
  // its type last added (whose local ids are consecutive); else -1.
  int64_t first_local_id_if_added(int64_t t, const at::Tensor& srcs) const;
  std::vector<IdMap> maps_;
  struct Added {
    at::Tensor nodes;
    int64_t version = 0;
    int64_t first = -1;
  };
  std::vector<Added> added_;  // per node type
};

}  // namespace glt
