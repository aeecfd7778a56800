#pragma once
// nn::RMSNorm over the last dimension, as Hugging Face's LlamaRMSNorm computes it:
//
//   y = weight * (x_32 * rsqrt(mean(x_32^2) + eps)).to(x.dtype)     (x_32 = x in fp32)
//
// The normalisation runs in fp32 whatever x's dtype (fp64 stays fp64); the product with the
// weight runs in the promoted dtype of the weight and the rounded result, as in transformers.
// A CPU input in fp32 or fp64 with a weight of its dtype runs as one op (RMSNormBackward) that
// keeps 1/rms per row for its backward; other inputs run the composed ops.
#include <optional>

#include "mantissa/nn/module.h"

namespace mantissa::nn {

class RMSNorm : public Module {
 public:
  // weight ones (hidden_size), created in `dtype` (the default dtype when none is given).
  explicit RMSNorm(int64_t hidden_size, double eps = 1e-6,
                   std::optional<DType> dtype = std::nullopt);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  int64_t hidden_size() const { return hidden_size_; }
  double eps() const { return eps_; }

  Tensor weight;  // (hidden_size)

 private:
  int64_t hidden_size_;
  double eps_;
};

}  // namespace mantissa::nn
