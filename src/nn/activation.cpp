#include "mantissa/nn/activation.h"

#include "mantissa/nn/functional.h"
#include "mantissa/ops/elementwise.h"

namespace mantissa::nn {

Tensor ReLU::forward(const Tensor& input) { return functional::relu(input); }

Tensor Tanh::forward(const Tensor& input) { return tanh(input); }

Tensor Sigmoid::forward(const Tensor& input) { return sigmoid(input); }

GELU::GELU(std::string approximate) : Module("GELU"), approximate_(std::move(approximate)) {
  MANTISSA_CHECK(approximate_ == "none" || approximate_ == "tanh", "GELU",
                 "approximate must be \"none\" or \"tanh\", got \"{}\"", approximate_);
}

Tensor GELU::forward(const Tensor& input) { return functional::gelu(input, approximate_); }

std::string GELU::extra_repr() const { return "approximate='" + approximate_ + "'"; }

}  // namespace mantissa::nn
