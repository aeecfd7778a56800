#include "mantissa/nn/linear.h"

#include <cmath>

#include "mantissa/core/default_dtype.h"
#include "mantissa/nn/init.h"
#include "mantissa/ops/linear.h"
#include "nn/layer_error.h"

namespace mantissa::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias,
               std::optional<DType> requested, Generator* gen)
    : Module("Linear"), in_features_(in_features), out_features_(out_features) {
  const DType dtype = requested.value_or(get_default_dtype());
  MANTISSA_CHECK(in_features >= 0 && out_features >= 0, "Linear",
                 "feature counts must be non-negative, got in_features={} out_features={}",
                 in_features, out_features);
  MANTISSA_CHECK(dtype.is_floating_point() && !dtype.is_float8(), "Linear",
                 "expected a floating dtype (float64, float32, float16, bfloat16), got {}",
                 dtype.name());
  weight = register_parameter("weight", empty({out_features, in_features}, dtype));
  if (with_bias) bias = register_parameter("bias", empty({out_features}, dtype));
  reset_parameters(gen);
}

void Linear::reset_parameters(Generator* gen) {
  // kaiming_uniform_(a=sqrt(5)): gain sqrt(1/3) times sqrt(3/fan_in) = 1/sqrt(fan_in).
  if (in_features_ > 0) {
    init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::kFanIn, "leaky_relu", gen);
  }
  if (bias.defined()) {
    const double bound =
        in_features_ > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features_)) : 0.0;
    init::uniform_(bias, -bound, bound, gen);
  }
}

Tensor Linear::forward(const Tensor& input) {
  return detail::forward_in_layer(*this, [&] { return mantissa::linear(input, weight, bias); });
}

std::string Linear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", in_features_, out_features_,
                     bias.defined());
}

}  // namespace mantissa::nn
