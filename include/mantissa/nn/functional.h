#pragma once
// torch.nn.functional: stateless layer functions. linear is implemented here (one fused
// oneDNN matmul + bias and one LinearBackward node); the activations forward to the ops.
#include <string_view>

#include "mantissa/core/generator.h"
#include "mantissa/core/tensor.h"

namespace mantissa::nn::functional {

// y = x @ weight^T + bias. x: (..., in), weight: (out, in), bias: undefined or (out).
// Returns (..., out). x, weight and bias share one floating dtype. Differentiable in all
// three (dbias = sum of the output gradient over rows).
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor());

Tensor relu(const Tensor& input);
// approximate: "none" (erf) or "tanh".
Tensor gelu(const Tensor& input, std::string_view approximate = "none");
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true, Generator* gen = nullptr);

}  // namespace mantissa::nn::functional

namespace mantissa::nn {
namespace F = functional;
}
