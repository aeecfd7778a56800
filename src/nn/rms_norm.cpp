#include "mantissa/nn/rms_norm.h"

#include <cmath>

#include <fmt/format.h>

#include "mantissa/core/default_dtype.h"
#include "mantissa/core/shape.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"

namespace mantissa::nn {

RMSNorm::RMSNorm(int64_t hidden_size, double eps, std::optional<DType> dtype)
    : Module("RMSNorm"), hidden_size_(hidden_size), eps_(eps) {
  MANTISSA_CHECK(hidden_size > 0, "RMSNorm", "hidden_size must be positive, got {}", hidden_size);
  MANTISSA_CHECK(std::isfinite(eps) && eps >= 0, "RMSNorm", "eps must be finite and >= 0, got {}",
                 eps);
  weight = register_parameter("weight", ones({hidden_size}, dtype.value_or(get_default_dtype())));
}

Tensor RMSNorm::forward(const Tensor& input) {
  MANTISSA_CHECK(input.dim() >= 1 && input.size(input.dim() - 1) == hidden_size_, "RMSNorm",
                 "expected input (..., {}), got shape {}", hidden_size_, shape_str(input.shape()));
  const Tensor x = input.dtype() == kFloat64 ? input : input.to(kFloat32);
  const Tensor variance = mean(mul(x, x), {-1}, /*keepdim=*/true);
  const Tensor normed = mul(x, rsqrt(add(variance, eps_)));
  return mul(weight, normed.to(input.dtype()));
}

std::string RMSNorm::extra_repr() const { return fmt::format("({},), eps={}", hidden_size_, eps_); }

}  // namespace mantissa::nn
