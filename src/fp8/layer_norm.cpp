#include "mantissa/fp8/layer_norm.h"

#include "mantissa/core/default_dtype.h"
#include "mantissa/core/error.h"
#include "mantissa/ops/layer_norm.h"

namespace mantissa::fp8 {

LayerNorm::LayerNorm(int64_t hidden, double eps, bool with_bias, std::optional<DType> dtype)
    : Module("Fp8LayerNorm"), eps_(eps) {
  const DType dt = dtype.value_or(get_default_dtype());
  weight = register_parameter("weight", ones({hidden}, dt));
  if (with_bias) bias = register_parameter("bias", zeros({hidden}, dt));
}

LayerNorm::LayerNorm(Tensor w, Tensor b, double eps) : Module("Fp8LayerNorm"), eps_(eps) {
  weight = register_parameter("weight", w, w.requires_grad());
  if (b.defined()) bias = register_parameter("bias", b, b.requires_grad());
}

std::shared_ptr<LayerNorm> LayerNorm::from_layer_norm(const nn::LayerNorm& ln) {
  MANTISSA_CHECK(ln.weight.defined() && ln.weight.dim() == 1, "fp8 LayerNorm",
                 "only a LayerNorm over one dimension with elementwise_affine can be replaced");
  auto m = std::shared_ptr<LayerNorm>(new LayerNorm(ln.weight, ln.bias, ln.eps()));
  m->train(ln.is_training());
  return m;
}

Tensor LayerNorm::forward(const Tensor& input) {
  return layer_norm(input, {weight.size(0)}, weight, bias, eps_);
}

std::string LayerNorm::extra_repr() const {
  return fmt::format("({},), eps={}", weight.size(0), eps_);
}

LayerNormLinear::LayerNormLinear(int64_t in_features, int64_t out_features, bool with_bias,
                                 double eps, std::optional<DType> dtype, int64_t amax_history_len)
    : Fp8Module("Fp8LayerNormLinear", amax_history_len), eps_(eps) {
  const DType dt = dtype.value_or(get_default_dtype());
  nn::Linear init(in_features, out_features, with_bias, dt);
  layer_norm_weight = register_parameter("layer_norm_weight", ones({in_features}, dt));
  layer_norm_bias = register_parameter("layer_norm_bias", zeros({in_features}, dt));
  weight = register_parameter("weight", init.weight.detach());
  if (with_bias) bias = register_parameter("bias", init.bias.detach());
}

Tensor LayerNormLinear::forward(const Tensor& input) {
  follow_active_recipe();
  const Tensor normed =
      layer_norm(input, {weight.size(1)}, layer_norm_weight, layer_norm_bias, eps_);
  return fp8_linear(normed, weight, bias, fp8_state(), &cache_);
}

std::string LayerNormLinear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}, eps={}", weight.size(1),
                     weight.size(0), bias.defined(), eps_);
}

}  // namespace mantissa::fp8
