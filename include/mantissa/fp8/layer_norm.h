#pragma once
// fp8::LayerNorm and fp8::LayerNormLinear (docs/fp8.md "The FP8 layers").
// LayerNorm has no FP8 path in TransformerEngine either: it is a high-precision norm over the
// last dimension, in the module's dtype, and exists so the plugin's replacement mirrors
// Lightning's (te.LayerNorm). LayerNormLinear is a norm followed by an FP8 Linear in one
// module, whose norm output goes straight into the FP8 cast of the Linear's input.
#include <optional>

#include "mantissa/fp8/linear.h"
#include "mantissa/nn/normalization.h"

namespace mantissa::fp8 {

class LayerNorm : public nn::Module {
 public:
  // weight ones, bias zeros, over the last dimension of size `hidden`.
  explicit LayerNorm(int64_t hidden, double eps = 1e-5, bool with_bias = true,
                     std::optional<DType> dtype = std::nullopt);
  // Takes over an nn::LayerNorm's weight and bias (1-D normalized shape, affine); throws
  // otherwise.
  static std::shared_ptr<LayerNorm> from_layer_norm(const nn::LayerNorm& ln);

  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  double eps() const { return eps_; }

  Tensor weight;
  Tensor bias;

 private:
  LayerNorm(Tensor weight, Tensor bias, double eps);
  double eps_;
};

class LayerNormLinear : public Fp8Module {
 public:
  // Parameters: "layer_norm_weight", "layer_norm_bias" (in_features), "weight" (out, in),
  // "bias" (out).
  LayerNormLinear(int64_t in_features, int64_t out_features, bool with_bias = true,
                  double eps = 1e-5, std::optional<DType> dtype = std::nullopt,
                  int64_t amax_history_len = 1024);

  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  WeightCache& weight_cache() { return cache_; }

  Tensor layer_norm_weight;
  Tensor layer_norm_bias;
  Tensor weight;
  Tensor bias;

 private:
  double eps_;
  WeightCache cache_;
};

}  // namespace mantissa::fp8
