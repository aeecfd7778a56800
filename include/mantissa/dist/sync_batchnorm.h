#pragma once
// SyncBatchNorm2d (torch.nn.SyncBatchNorm): batch normalisation whose training statistics are
// those of the global batch, all ranks together. The per-channel sums and sums of squares are
// all-reduced in forward, and their gradients in backward (all_reduce_sum below is a
// differentiable op), so the gradient is the one of a single process seeing the whole batch.
// Eval uses the running statistics, like BatchNorm2d. Costs two small blocking all-reduces per
// layer in forward and two in backward.
#include <memory>

#include "mantissa/dist/communicator.h"
#include "mantissa/nn/batchnorm.h"
#include "mantissa/nn/module.h"

namespace mantissa::dist {

// y = the sum of x over the ranks (same shape, float32); backward all-reduces the gradient.
Tensor all_reduce_sum(const Tensor& x, std::shared_ptr<Communicator> comm);

class SyncBatchNorm2d : public nn::Module {
 public:
  // Takes over bn's parameters and buffers (the same tensors, under the same names).
  SyncBatchNorm2d(const nn::BatchNorm2d& bn, std::shared_ptr<Communicator> comm);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  int64_t num_features_;
  nn::BatchNormOptions options_;
  std::shared_ptr<Communicator> comm_;
};

// Replaces every BatchNorm2d under root by a SyncBatchNorm2d; returns how many.
int convert_sync_batchnorm(nn::Module& root, std::shared_ptr<Communicator> comm);

}  // namespace mantissa::dist
