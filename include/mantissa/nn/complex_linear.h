#pragma once
// nn::ComplexLinear: y = x W^T + b with complex W and b (docs/complex.md). Parameters are
// created in the complex dtype that matches the default dtype: complex64 normally (32-true),
// complex128 inside a float64 scope such as Trainer::init_module() under 64-true. A real
// input is promoted to complex. Low-precision plugins refuse such a model.
#include <optional>

#include "mantissa/core/generator.h"
#include "mantissa/nn/module.h"

namespace mantissa::nn {

class ComplexLinear : public Module {
 public:
  // Real and imaginary parts of weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)) independently
  // (what torch.nn.Linear(dtype=torch.cfloat)'s default init draws), from `gen` or the
  // default generator. dtype: complex64 or complex128; get_default_complex_dtype() if unset.
  ComplexLinear(int64_t in_features, int64_t out_features, bool with_bias = true,
                std::optional<DType> dtype = std::nullopt, Generator* gen = nullptr);

  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  Tensor weight;  // (out_features, in_features), complex
  Tensor bias;    // (out_features), complex; undefined without bias

 private:
  int64_t in_features_;
  int64_t out_features_;
};

}  // namespace mantissa::nn
