#pragma once
// nn::Dropout: zeroes inputs with probability p while training, identity in eval().
#include "mantissa/core/generator.h"
#include "mantissa/nn/module.h"

namespace mantissa::nn {

class Dropout : public Module {
 public:
  // Masks come from `gen` (the default generator when null).
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  double p() const { return p_; }
  // The generator masks come from; null for the default one.
  Generator* generator() const { return gen_; }

 private:
  double p_;
  Generator* gen_;
};

}  // namespace mantissa::nn
