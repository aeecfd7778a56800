#include "gpt2_layers.h"

#include <cmath>

#include "mantissa/nn/dropout.h"
#include "mantissa/nn/normalization.h"
#include "mantissa/ops/elementwise.h"

namespace mantissa::models {

GPT2Attention::GPT2Attention(const HfConfig& c, int64_t layer_index, const std::string& path,
                             const LinearFactory& make, Generator* dropout_gen)
    : nn::Module("GPT2Attention"),
      heads_(c.num_attention_heads),
      head_dim_(c.head_dim),
      attention_dropout_(c.attention_dropout),
      gen_(dropout_gen) {
  scale_ = c.scale_attn_weights ? 1.0 / std::sqrt(static_cast<double>(head_dim_)) : 1.0;
  if (c.scale_attn_by_inverse_layer_idx) scale_ /= static_cast<double>(layer_index + 1);
  register_module("c_attn", make(path + ".c_attn", c.hidden_size, 3 * c.hidden_size, true));
  register_module("c_proj", make(path + ".c_proj", c.hidden_size, c.hidden_size, true));
  register_module("resid_dropout", std::make_shared<nn::Dropout>(c.residual_dropout, dropout_gen));
}

Tensor GPT2Attention::step(const Tensor& x, const LayerStep& s) {
  const int64_t B = x.size(0), T = x.size(1), E = heads_ * head_dim_;
  const Tensor qkv = child("c_attn")->forward(x);  // (B, T, 3E): q | k | v
  auto heads = [&](int64_t part) {
    return qkv.narrow(2, part * E, E).reshape({B, T, heads_, head_dim_}).transpose(1, 2);
  };
  const Tensor out = causal_attention(heads(0), heads(1), heads(2), s, scale_,
                                      is_training() ? attention_dropout_ : 0.0, gen_);
  return child("resid_dropout")->forward(child("c_proj")->forward(out));
}

GPT2MLP::GPT2MLP(const HfConfig& c, const std::string& path, const LinearFactory& make,
                 Generator* dropout_gen)
    : nn::Module("GPT2MLP"), approximate_(c.activation == "gelu" ? "none" : "tanh") {
  register_module("c_fc", make(path + ".c_fc", c.hidden_size, c.intermediate_size, true));
  register_module("c_proj", make(path + ".c_proj", c.intermediate_size, c.hidden_size, true));
  register_module("dropout", std::make_shared<nn::Dropout>(c.residual_dropout, dropout_gen));
}

Tensor GPT2MLP::forward(const Tensor& x) {
  return child("dropout")->forward(
      child("c_proj")->forward(gelu(child("c_fc")->forward(x), approximate_)));
}

GPT2Block::GPT2Block(const HfConfig& c, int64_t layer_index, const std::string& path,
                     const LinearFactory& make, DType dtype, Generator* dropout_gen)
    : DecoderLayer("GPT2Block") {
  const std::vector<int64_t> shape{c.hidden_size};
  register_module("ln_1", std::make_shared<nn::LayerNorm>(shape, c.norm_eps, true, true, dtype));
  register_module(
      "attn", std::make_shared<GPT2Attention>(c, layer_index, path + ".attn", make, dropout_gen));
  register_module("ln_2", std::make_shared<nn::LayerNorm>(shape, c.norm_eps, true, true, dtype));
  register_module("mlp", std::make_shared<GPT2MLP>(c, path + ".mlp", make, dropout_gen));
}

Tensor GPT2Block::step(const Tensor& x, const LayerStep& s) {
  auto& attn = *child_as<GPT2Attention>("attn");
  Tensor h = add(x, attn.step(child("ln_1")->forward(x), s));
  return add(h, child("mlp")->forward(child("ln_2")->forward(h)));
}

}  // namespace mantissa::models
