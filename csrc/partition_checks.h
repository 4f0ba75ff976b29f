// The partition ops' input checks (bucket_by_partition, group_by_partition,
// stitch_neighbors, scatter_rows_, concat, sample_neighbors_partitioned),
// shared by their CPU and CUDA kernels: as checks.h's, each names the
// argument and what is wrong with it before any memory is read.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <utility>
#include <vector>

#include "checks.h"

namespace glt {

// bucket_by_partition: the partitions, contiguous.
inline at::Tensor checked_bucket_args(const at::Tensor& partitions, int64_t num_partitions) {
  TORCH_CHECK_VALUE(partitions.dim() == 1, "partitions must be 1-D, got shape ",
                    partitions.sizes());
  TORCH_CHECK_VALUE(at::isIntegralType(partitions.scalar_type(), /*includeBool=*/false),
                    "partitions must be an integer tensor, got ", partitions.scalar_type());
  TORCH_CHECK_VALUE(num_partitions >= 1, "num_partitions must be at least 1, got ", num_partitions);
  return partitions.contiguous();
}

// group_by_partition: (book, ids), contiguous.
inline std::pair<at::Tensor, at::Tensor> checked_group_args(const at::Tensor& book,
                                                            const at::Tensor& ids,
                                                            int64_t num_partitions) {
  TORCH_CHECK_VALUE(book.dim() == 1, "book must be 1-D, got shape ", book.sizes());
  TORCH_CHECK_VALUE(at::isIntegralType(book.scalar_type(), /*includeBool=*/false),
                    "book must be an integer tensor, got ", book.scalar_type());
  TORCH_CHECK_VALUE(ids.dim() == 1 && ids.scalar_type() == at::kLong,
                    "ids must be a 1-D int64 tensor, got ", ids.scalar_type(), " of shape ",
                    ids.sizes());
  check_device(ids, "ids", book.device());
  TORCH_CHECK_VALUE(num_partitions >= 1, "num_partitions must be at least 1, got ", num_partitions);
  return {book.contiguous(), ids.contiguous()};
}

// scatter_rows_: (positions, rows), contiguous; `out` is written in place.
inline std::pair<at::Tensor, at::Tensor> checked_scatter_args(const at::Tensor& out,
                                                              const at::Tensor& positions,
                                                              const at::Tensor& rows) {
  TORCH_CHECK_VALUE(out.dim() == 2 && rows.dim() == 2,
                    "scatter_rows_: out and rows must be 2-D, got ", out.dim(), "-D and ",
                    rows.dim(), "-D");
  TORCH_CHECK_VALUE(out.scalar_type() == rows.scalar_type(), "scatter_rows_: out is ",
                    out.scalar_type(), " but rows are ", rows.scalar_type());
  TORCH_CHECK_VALUE(out.size(1) == rows.size(1), "scatter_rows_: out rows have ", out.size(1),
                    " columns but rows have ", rows.size(1));
  TORCH_CHECK_VALUE(out.is_contiguous(), "scatter_rows_: out must be contiguous");
  TORCH_CHECK_VALUE(positions.dim() == 1 && positions.scalar_type() == at::kLong,
                    "scatter_rows_: positions must be a 1-D int64 tensor");
  TORCH_CHECK_VALUE(positions.numel() == rows.size(0), "scatter_rows_: ", positions.numel(),
                    " positions for ", rows.size(0), " rows");
  check_device(positions, "positions", out.device());
  check_device(rows, "rows", out.device());
  return {positions.contiguous(), rows.contiguous()};
}

// concat: the parts (at least one; 1-D, of one dtype and device), contiguous.
inline std::vector<at::Tensor> checked_concat_parts(at::TensorList parts) {
  TORCH_CHECK_VALUE(!parts.empty(), "concat needs at least one tensor");
  const auto dtype = parts[0].scalar_type();
  std::vector<at::Tensor> out;
  for (size_t p = 0; p < parts.size(); ++p) {
    TORCH_CHECK_VALUE(parts[p].dim() == 1, "concat joins 1-D tensors, got a ", parts[p].dim(),
                      "-D one at position ", p);
    TORCH_CHECK_VALUE(parts[p].scalar_type() == dtype, "concat joins tensors of one dtype, got ",
                      dtype, " and ", parts[p].scalar_type());
    TORCH_CHECK_VALUE(parts[p].device() == parts[0].device(),
                      "concat joins tensors of one device, got ", parts[0].device(), " and ",
                      parts[p].device());
    out.push_back(parts[p].contiguous());
  }
  return out;
}

// stitch_neighbors' pieces: per piece, its seeds' positions, their counts,
// their neighbors and (or none at all) their edge ids.
struct StitchPieces {
  std::vector<at::Tensor> pos, num, nbr, edge;  // edge: empty without edge ids
};

// The pieces, contiguous and checked: 1-D int64 tensors on one device, a
// count per position and an edge id per neighbor. What the values must be
// (positions in range and distinct, counts that add up) is the kernels'.
inline StitchPieces checked_pieces(at::TensorList positions, at::TensorList nbr_nums,
                                   at::TensorList nbrs, at::TensorList edges) {
  const size_t num_pieces = positions.size();
  const bool with_edge = !edges.empty();
  TORCH_CHECK_VALUE(nbr_nums.size() == num_pieces && nbrs.size() == num_pieces &&
                        (!with_edge || edges.size() == num_pieces),
                    "stitch_neighbors: ", num_pieces, " positions, ", nbr_nums.size(),
                    " nbr_nums, ", nbrs.size(), " nbrs and ", edges.size(),
                    " edges (all as many, or no edges)");
  StitchPieces pieces;
  for (size_t j = 0; j < num_pieces; ++j) {
    const at::Tensor pos = positions[j].contiguous(), num = nbr_nums[j].contiguous();
    const at::Tensor nbr = nbrs[j].contiguous();
    TORCH_CHECK_VALUE(pos.dim() == 1 && num.dim() == 1 && nbr.dim() == 1,
                      "stitch_neighbors: piece ", j, " has a tensor that is not 1-D");
    TORCH_CHECK_VALUE(pos.scalar_type() == at::kLong && num.scalar_type() == at::kLong &&
                          nbr.scalar_type() == at::kLong,
                      "stitch_neighbors: piece ", j, " must be int64");
    TORCH_CHECK_VALUE(pos.numel() == num.numel(), "stitch_neighbors: piece ", j, " has ",
                      pos.numel(), " positions but ", num.numel(), " counts");
    const at::Device device = positions[0].device();
    TORCH_CHECK_VALUE(pos.device() == device && num.device() == device && nbr.device() == device,
                      "stitch_neighbors: piece ", j, " is not on ", device, " as piece 0 is");
    pieces.pos.push_back(pos);
    pieces.num.push_back(num);
    pieces.nbr.push_back(nbr);
    if (with_edge) {
      const at::Tensor edge = edges[j].contiguous();
      TORCH_CHECK_VALUE(edge.dim() == 1 && edge.scalar_type() == at::kLong &&
                            edge.numel() == nbr.numel() && edge.device() == device,
                        "stitch_neighbors: piece ", j, " needs one int64 edge id per neighbor");
      pieces.edge.push_back(edge);
    }
  }
  return pieces;
}

// A partition's topology for sample_neighbors_partitioned (or none: not on
// this host).
struct PartitionTopology {
  at::Tensor indptr, indices;
  std::optional<at::Tensor> edge_ids, edge_weights;
  int64_t num_rows = -1;  // -1: none
};

// The partitions' topologies, checked, and their index dtype (one for all).
struct PartitionTopologies {
  std::vector<PartitionTopology> parts;
  at::ScalarType dtype;
};

// sample_neighbors_partitioned's topologies: each given one a checked CSR
// on `device`, all of one dtype, with edge ids (weights) for all or none.
inline PartitionTopologies checked_partitions(
    const c10::List<std::optional<at::Tensor>>& indptrs,
    const c10::List<std::optional<at::Tensor>>& indices,
    const c10::List<std::optional<at::Tensor>>& edge_ids,
    const c10::List<std::optional<at::Tensor>>& edge_weights, int64_t num_rng_seeds,
    const at::Device& device) {
  const size_t n = indptrs.size();
  TORCH_CHECK_VALUE(n >= 1, "sample_neighbors_partitioned needs at least one partition");
  TORCH_CHECK_VALUE(indices.size() == n && edge_ids.size() == n && edge_weights.size() == n &&
                        static_cast<size_t>(num_rng_seeds) == n,
                    "sample_neighbors_partitioned expects indptrs, indices, edge_ids, "
                    "edge_weights and rng_seeds of one length, got ",
                    n, ", ", indices.size(), ", ", edge_ids.size(), ", ", edge_weights.size(),
                    " and ", num_rng_seeds);
  std::vector<PartitionTopology> parts(n);
  std::optional<at::ScalarType> dtype;
  std::optional<bool> with_edge, with_weight;
  for (size_t p = 0; p < n; ++p) {
    const std::optional<at::Tensor> ptr = indptrs.get(p), idx = indices.get(p);
    TORCH_CHECK_VALUE(ptr.has_value() == idx.has_value(), "partition ", p,
                      " has indptr or indices but not both");
    if (!ptr.has_value()) continue;
    PartitionTopology& t = parts[p];
    t.indptr = *ptr;
    t.indices = *idx;
    t.edge_ids = edge_ids.get(p);
    t.edge_weights = edge_weights.get(p);
    TORCH_CHECK_VALUE(t.indptr.device() == device, "partition ", p, "'s topology must be on ",
                      device, " (as the seeds), got ", t.indptr.device());
    t.num_rows = check_csr(t.indptr, t.indices);
    check_edge_data(t.edge_ids, t.edge_weights, t.indices);
    TORCH_CHECK_VALUE(!dtype || *dtype == t.indptr.scalar_type(), "partition ", p,
                      "'s topology is ", t.indptr.scalar_type(), ", the others' ", *dtype);
    TORCH_CHECK_VALUE(!with_edge || *with_edge == t.edge_ids.has_value(),
                      "edge_ids must be given for every partition's topology or for none");
    TORCH_CHECK_VALUE(!with_weight || *with_weight == t.edge_weights.has_value(),
                      "edge_weights must be given for every partition's topology or for none");
    dtype = t.indptr.scalar_type();
    with_edge = t.edge_ids.has_value();
    with_weight = t.edge_weights.has_value();
  }
  TORCH_CHECK_VALUE(dtype.has_value(), "sample_neighbors_partitioned needs a partition's topology");
  return {std::move(parts), *dtype};
}

}  // namespace glt
