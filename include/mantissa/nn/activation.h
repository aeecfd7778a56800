#pragma once
// Activation modules (no parameters).
#include <string>

#include "mantissa/nn/module.h"

namespace mantissa::nn {

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& input) override;
};

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& input) override;
};

class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& input) override;
};

class GELU : public Module {
 public:
  // "none": x * Phi(x) with erf; "tanh": the tanh approximation.
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  const std::string& approximate() const { return approximate_; }

 private:
  std::string approximate_;
};

}  // namespace mantissa::nn
