#include "llama_layers.h"

#include <cmath>

#include "mantissa/nn/rms_norm.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/rotary.h"
#include "mantissa/ops/silu.h"

namespace mantissa::models {

LlamaAttention::LlamaAttention(const HfConfig& c, const std::string& path,
                               const LinearFactory& make, std::shared_ptr<RotaryTable> rotary,
                               DType dtype, Generator* dropout_gen)
    : nn::Module("LlamaAttention"),
      heads_(c.num_attention_heads),
      kv_heads_(c.num_key_value_heads),
      head_dim_(c.head_dim),
      window_(c.sliding_window),
      qk_norm_(c.qk_norm),
      dropout_(c.attention_dropout),
      rotary_(std::move(rotary)),
      gen_(dropout_gen) {
  const int64_t q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
  register_module("q_proj", make(path + ".q_proj", c.hidden_size, q, c.qkv_bias));
  register_module("k_proj", make(path + ".k_proj", c.hidden_size, kv, c.qkv_bias));
  register_module("v_proj", make(path + ".v_proj", c.hidden_size, kv, c.qkv_bias));
  register_module("o_proj", make(path + ".o_proj", q, c.hidden_size, c.o_bias));
  if (qk_norm_) {
    register_module("q_norm", std::make_shared<nn::RMSNorm>(head_dim_, c.norm_eps, dtype));
    register_module("k_norm", std::make_shared<nn::RMSNorm>(head_dim_, c.norm_eps, dtype));
  }
}

Tensor LlamaAttention::step(const Tensor& x, const LayerStep& s) {
  const int64_t B = x.size(0), T = x.size(1);
  // (B, T, heads * D) -> (B, heads, T, D), each head normalized first when the layer has the
  // norm (Qwen3's q_norm and k_norm).
  auto heads = [&](const char* proj, int64_t n, const char* norm) {
    Tensor h = child(proj)->forward(x).reshape({B, T, n, head_dim_});
    if (qk_norm_ && norm) h = child(norm)->forward(h);
    return h.transpose(1, 2);
  };
  Tensor q = heads("q_proj", heads_, "q_norm"), k = heads("k_proj", kv_heads_, "k_norm"),
         v = heads("v_proj", kv_heads_, nullptr);
  const auto [cos, sin] = rotary_->rows(s.offset, T, x.device());
  q = apply_rotary_embedding(q, cos, sin);
  k = apply_rotary_embedding(k, cos, sin);
  const Tensor out = causal_attention(q, k, v, s, 1.0 / std::sqrt(static_cast<double>(head_dim_)),
                                      is_training() ? dropout_ : 0.0, gen_, window_);
  return child("o_proj")->forward(out);
}

LlamaMLP::LlamaMLP(const HfConfig& c, const std::string& path, const LinearFactory& make)
    : nn::Module("LlamaMLP") {
  register_module("gate_proj",
                  make(path + ".gate_proj", c.hidden_size, c.intermediate_size, c.mlp_bias));
  register_module("up_proj",
                  make(path + ".up_proj", c.hidden_size, c.intermediate_size, c.mlp_bias));
  register_module("down_proj",
                  make(path + ".down_proj", c.intermediate_size, c.hidden_size, c.mlp_bias));
}

Tensor LlamaMLP::forward(const Tensor& x) {
  return child("down_proj")
      ->forward(silu_mul(child("gate_proj")->forward(x), child("up_proj")->forward(x)));
}

LlamaDecoderLayer::LlamaDecoderLayer(const HfConfig& c, const std::string& path,
                                     const LinearFactory& make, std::shared_ptr<RotaryTable> rotary,
                                     DType dtype, Generator* dropout_gen)
    : DecoderLayer("LlamaDecoderLayer") {
  register_module("self_attn",
                  std::make_shared<LlamaAttention>(c, path + ".self_attn", make, std::move(rotary),
                                                   dtype, dropout_gen));
  register_module("mlp", std::make_shared<LlamaMLP>(c, path + ".mlp", make));
  register_module("input_layernorm",
                  std::make_shared<nn::RMSNorm>(c.hidden_size, c.norm_eps, dtype));
  register_module("post_attention_layernorm",
                  std::make_shared<nn::RMSNorm>(c.hidden_size, c.norm_eps, dtype));
}

Tensor LlamaDecoderLayer::step(const Tensor& x, const LayerStep& s) {
  auto& attn = *child_as<LlamaAttention>("self_attn");
  Tensor h = add(x, attn.step(child("input_layernorm")->forward(x), s));
  return add(h, child("mlp")->forward(child("post_attention_layernorm")->forward(h)));
}

}  // namespace mantissa::models
