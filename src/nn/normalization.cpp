#include "mantissa/nn/normalization.h"
#include "mantissa/core/default_dtype.h"

#include <fmt/ranges.h>

#include "mantissa/nn/init.h"
#include "mantissa/ops/layer_norm.h"

namespace mantissa::nn {

LayerNorm::LayerNorm(std::vector<int64_t> normalized_shape, double eps, bool elementwise_affine,
                     bool with_bias, std::optional<DType> requested_dtype)
    : Module("LayerNorm"), normalized_shape_(std::move(normalized_shape)), eps_(eps) {
  const DType dtype = requested_dtype.value_or(get_default_dtype());
  MANTISSA_CHECK(!normalized_shape_.empty(), "LayerNorm", "normalized_shape must not be empty");
  for (int64_t s : normalized_shape_)
    MANTISSA_CHECK(s > 0, "LayerNorm", "normalized_shape entries must be positive, got {}",
                   fmt::join(normalized_shape_, ", "));
  const Shape shape(normalized_shape_.begin(), normalized_shape_.end());
  if (elementwise_affine) {
    weight = register_parameter("weight", ones(shape, dtype));
    if (with_bias) bias = register_parameter("bias", zeros(shape, dtype));
  }
}

Tensor LayerNorm::forward(const Tensor& input) {
  return layer_norm(input, normalized_shape_, weight, bias, eps_);
}

std::string LayerNorm::extra_repr() const {
  return fmt::format("({}), eps={}, elementwise_affine={}", fmt::join(normalized_shape_, ", "),
                     eps_, weight.defined());
}

}  // namespace mantissa::nn
