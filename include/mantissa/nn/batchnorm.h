#pragma once
// nn::BatchNorm2d: batch normalisation over the channels of [N, C, H, W] inputs.
#include <optional>
#include "mantissa/nn/module.h"

namespace mantissa::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  double momentum = 0.1;
  bool affine = true;               // learnable weight (ones) and bias (zeros)
  bool track_running_stats = true;  // running_mean/var/num_batches_tracked buffers
};

class BatchNorm2d : public Module {
 public:
  // weight and bias are created in `dtype` and follow Module::to like any parameter; the
  // running statistics are float32 buffers that stay float32 under Module::to(kBFloat16/
  // kFloat16) (statistics of many batches need more than 8 bits of mantissa).
  explicit BatchNorm2d(int64_t num_features, const BatchNormOptions& options = {},
                       std::optional<DType> dtype = std::nullopt);

  // Training: batch statistics, running statistics updated and num_batches_tracked + 1.
  // Eval: running statistics (batch statistics when track_running_stats is off).
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  // Running mean 0, variance 1, count 0.
  void reset_running_stats();

  int64_t num_features() const { return num_features_; }
  const BatchNormOptions& options() const { return options_; }

  Tensor weight, bias;               // [C], undefined without affine
  Tensor running_mean, running_var;  // [C] float32
  Tensor num_batches_tracked;        // scalar int64

 private:
  int64_t num_features_;
  BatchNormOptions options_;
};

}  // namespace mantissa::nn
