#pragma once
// nn::LayerNorm over the trailing dimensions.
#include <optional>
#include <vector>

#include "mantissa/nn/module.h"

namespace mantissa::nn {

class LayerNorm : public Module {
 public:
  // weight ones, bias zeros (PyTorch), of shape normalized_shape, created in `dtype`.
  explicit LayerNorm(std::vector<int64_t> normalized_shape, double eps = 1e-5,
                     bool elementwise_affine = true, bool with_bias = true,
                     std::optional<DType> dtype = std::nullopt);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  const std::vector<int64_t>& normalized_shape() const { return normalized_shape_; }
  double eps() const { return eps_; }

  Tensor weight;  // undefined without elementwise_affine
  Tensor bias;    // undefined without elementwise_affine or with_bias

 private:
  std::vector<int64_t> normalized_shape_;
  double eps_;
};

}  // namespace mantissa::nn
