#pragma once
// nn::Linear: y = x W^T + b with PyTorch's default initialisation.
#include <optional>

#include "mantissa/core/generator.h"
#include "mantissa/nn/module.h"

namespace mantissa::nn {

class Linear : public Module {
 public:
  // weight (out, in) ~ kaiming_uniform_(a = sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)); bias ~ the
  // same bound. Drawn from `gen` (the default generator, see manual_seed, when null) in double
  // and rounded once to `dtype` (get_default_dtype(), float32 unless set, when none is given).
  Linear(int64_t in_features, int64_t out_features, bool with_bias = true,
         std::optional<DType> dtype = std::nullopt, Generator* gen = nullptr);

  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  // Re-draws weight and bias as the constructor does.
  void reset_parameters(Generator* gen = nullptr);

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

  Tensor weight;  // (out_features, in_features)
  Tensor bias;    // (out_features), undefined without bias

 private:
  int64_t in_features_;
  int64_t out_features_;
};

}  // namespace mantissa::nn
