// The CUDA twin of the CPU Inducer (csrc/cpu/inducer.h): the same interface and
// results, over hash tables in GPU memory (csrc/kernels/inducer.h).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "kernels/batch_sample.h"
#include "kernels/hop_plan.h"

namespace glt {
namespace cuda {

class CudaInducer {
 public:
  // One id space per node type, on CUDA device `device`; `disjoint_bits` >
  // 0: disjoint sampling's keys (kernels::InducerImpl).
  CudaInducer(int64_t num_node_types, int64_t device, int64_t disjoint_bits = 0);
  ~CudaInducer();

  std::vector<at::Tensor> init_nodes(const std::vector<at::Tensor>& seeds, bool distinct = false);
  std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>> induce_next(
      const std::vector<int64_t>& src_types, const std::vector<int64_t>& nbr_types,
      const std::vector<at::Tensor>& srcs, const std::vector<at::Tensor>& nbrs,
      const std::vector<at::Tensor>& nbr_nums, const std::vector<at::Tensor>& row_outs = {},
      const std::vector<at::Tensor>& col_outs = {});
  kernels::HopOutputs sample_induce_next(const kernels::HopPlan& plan);
  kernels::BatchOutputs sample_batch(kernels::BatchPlan plan, bool replay = false);
  // sample_batch in two calls (kernels::InducerImpl::launch_batch): the
  // launch returns while the GPU runs the batch, the finish waits for it.
  void launch_batch(kernels::BatchPlan plan, bool replay = false);
  kernels::BatchOutputs finish_batch();
  at::Tensor local_ids(int64_t node_type, const at::Tensor& ids) const;
  void reset();
  int64_t num_node_types() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t device_;
};

}  // namespace cuda
}  // namespace glt
