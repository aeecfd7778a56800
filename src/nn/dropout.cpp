#include "mantissa/nn/dropout.h"

#include "mantissa/nn/functional.h"

namespace mantissa::nn {

Dropout::Dropout(double p, Generator* gen) : Module("Dropout"), p_(p), gen_(gen) {
  MANTISSA_CHECK(p >= 0.0 && p <= 1.0, "Dropout", "p must be in [0, 1], got {}", p);
}

Tensor Dropout::forward(const Tensor& input) {
  return functional::dropout(input, p_, is_training(), gen_);
}

std::string Dropout::extra_repr() const { return fmt::format("p={}", p_); }

}  // namespace mantissa::nn
