#pragma once
// torch.nn.functional: stateless layer functions, each forwarding to its op (linear to
// mantissa/ops/linear.h, the activations to mantissa/ops/elementwise.h).
#include <string_view>

#include "mantissa/core/generator.h"
#include "mantissa/core/tensor.h"

namespace mantissa::nn::functional {

// mantissa::linear (mantissa/ops/linear.h): y = x @ weight^T + bias.
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor());

Tensor relu(const Tensor& input);
// approximate: "none" (erf) or "tanh".
Tensor gelu(const Tensor& input, std::string_view approximate = "none");
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true, Generator* gen = nullptr);

}  // namespace mantissa::nn::functional

namespace mantissa::nn {
namespace F = functional;
}
