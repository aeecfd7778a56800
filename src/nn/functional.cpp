// torch.nn.functional: stateless layer functions, each forwarding to its op.
#include "mantissa/nn/functional.h"

#include "mantissa/ops/dropout.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/linear.h"

namespace mantissa::nn::functional {

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  return mantissa::linear(input, weight, bias);
}

Tensor relu(const Tensor& input) { return mantissa::relu(input); }

Tensor gelu(const Tensor& input, std::string_view approximate) {
  return mantissa::gelu(input, approximate);
}

Tensor dropout(const Tensor& input, double p, bool training, Generator* gen) {
  return mantissa::dropout(input, p, training, gen);
}

}  // namespace mantissa::nn::functional
