#include "mantissa/nn/complex_linear.h"

#include <fmt/format.h>

#include <cmath>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/default_dtype.h"
#include "mantissa/core/error.h"
#include "mantissa/ops/complex.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/matmul.h"

namespace mantissa::nn {
namespace {

// Independent U(-bound, bound) real and imaginary parts, drawn in float64, rounded once.
Tensor complex_uniform(const Shape& shape, double bound, DType dtype, Generator* gen) {
  NoGradGuard no_grad;
  const Tensor re = uniform(shape, -bound, bound, kFloat64, gen);
  const Tensor im = uniform(shape, -bound, bound, kFloat64, gen);
  return complex(re, im).to(dtype).detach();
}

}  // namespace

ComplexLinear::ComplexLinear(int64_t in_features, int64_t out_features, bool with_bias,
                             std::optional<DType> requested, Generator* gen)
    : Module("ComplexLinear"), in_features_(in_features), out_features_(out_features) {
  const DType dtype = requested ? *requested : get_default_complex_dtype();
  MANTISSA_CHECK(dtype.is_complex(), "ComplexLinear", "expected complex64 or complex128, got {}",
                 dtype.name());
  MANTISSA_CHECK(in_features > 0 && out_features > 0, "ComplexLinear",
                 "feature counts must be positive, got in_features={} out_features={}", in_features,
                 out_features);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight =
      register_parameter("weight", complex_uniform({out_features, in_features}, bound, dtype, gen));
  if (with_bias)
    bias = register_parameter("bias", complex_uniform({out_features}, bound, dtype, gen));
}

Tensor ComplexLinear::forward(const Tensor& input) {
  MANTISSA_CHECK(input.dim() == 2 && input.size(1) == in_features_, "ComplexLinear",
                 "expected input of shape [batch, {}], got {}", in_features_,
                 shape_str(input.shape()));
  Tensor y = matmul(input, weight.t());
  return bias.defined() ? add(y, bias) : y;
}

std::string ComplexLinear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}, dtype={}", in_features_,
                     out_features_, bias.defined() ? "True" : "False", weight.dtype().name());
}

}  // namespace mantissa::nn
