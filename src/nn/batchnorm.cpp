#include "mantissa/nn/batchnorm.h"
#include "mantissa/core/default_dtype.h"

#include "core/inplace.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/autograd/recompute.h"
#include "mantissa/ops/batch_norm.h"

namespace mantissa::nn {

BatchNorm2d::BatchNorm2d(int64_t num_features, const BatchNormOptions& options,
                         std::optional<DType> requested_dtype)
    : Module("BatchNorm2d"), num_features_(num_features), options_(options) {
  const DType dtype = requested_dtype.value_or(get_default_dtype());
  MANTISSA_CHECK(num_features >= 1, "BatchNorm2d", "num_features must be positive, got {}",
                 num_features);
  MANTISSA_CHECK(dtype.is_floating_point() && !dtype.is_float8(), "BatchNorm2d",
                 "expected a floating dtype (float64, float32, float16, bfloat16), got {}",
                 dtype.name());
  MANTISSA_CHECK(options.eps > 0 && options.momentum >= 0 && options.momentum <= 1, "BatchNorm2d",
                 "eps must be positive and momentum in [0, 1], got eps={} momentum={}", options.eps,
                 options.momentum);
  if (options.affine) {
    weight = register_parameter("weight", ones({num_features}, dtype));
    bias = register_parameter("bias", zeros({num_features}, dtype));
  }
  if (options.track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({num_features}, kFloat32), true);
    running_var = register_buffer("running_var", ones({num_features}, kFloat32), true);
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
}

void BatchNorm2d::reset_running_stats() {
  if (!options_.track_running_stats) return;
  mantissa::detail::zero_unchecked(running_mean);
  mantissa::detail::fill_unchecked(running_var, 1.0);
  mantissa::detail::zero_unchecked(num_batches_tracked);
}

Tensor BatchNorm2d::forward(const Tensor& input) {
  MANTISSA_CHECK(input.dim() == 4, "BatchNorm2d", "expected a 4-D input [N, C, H, W], got shape {}",
                 shape_str(input.shape()));
  MANTISSA_CHECK(input.size(1) == num_features_, "BatchNorm2d",
                 "input {} has {} channels, the layer was built for {}", shape_str(input.shape()),
                 input.size(1), num_features_);
  const bool use_batch_stats = is_training() || !options_.track_running_stats;
  // Activation checkpointing's replay of a forward (nn/checkpoint.h) normalises with the same
  // batch statistics but must not count the batch in the running ones a second time.
  const bool replay = is_training() && autograd::in_recompute();
  if (is_training() && options_.track_running_stats && !replay) {
    NoGradGuard no_grad;
    mantissa::detail::fill_unchecked(num_batches_tracked, num_batches_tracked.item() + 1);
  }
  return batch_norm(input, replay ? Tensor() : running_mean, replay ? Tensor() : running_var,
                    weight, bias, use_batch_stats, options_.momentum, options_.eps);
}

std::string BatchNorm2d::extra_repr() const {
  return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}", num_features_,
                     options_.eps, options_.momentum, options_.affine,
                     options_.track_running_stats);
}

}  // namespace mantissa::nn
