#pragma once
// nn::MultiheadAttention (batch_first) with PyTorch's fused input projection.
#include <optional>
#include "mantissa/core/generator.h"
#include "mantissa/nn/kv_buffer.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/module.h"

namespace mantissa::nn {

class MultiheadAttention : public Module {
 public:
  // in_proj_weight (3E, E) ~ xavier_uniform, in_proj_bias zeros, out_proj a Linear(E, E) with
  // zero bias (PyTorch's _reset_parameters). embed_dim must divide by num_heads. dropout is
  // applied to the attention weights while training, with masks from `gen`.
  //
  // in_proj_linear: hold the input projection as a Linear(E, 3E) child in the slot "in_proj"
  // (parameters "in_proj.weight", "in_proj.bias"; same values, same initial draw) instead of
  // the two parameters, so that precision plugins that replace Linear layers (FP8, 4-/8-bit,
  // LoRA) reach it, as they reach GPT-2's c_attn. That form is for self-attention only
  // (forward with query, key and value the same tensor). load_state_dict takes the
  // parameter form's keys too (in_proj_weight / in_proj_bias), for files written before.
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0,
                     bool with_bias = true, std::optional<DType> dtype = std::nullopt,
                     Generator* gen = nullptr, bool in_proj_linear = false);

  // Self-attention on x (B, T, E) -> (B, T, E).
  Tensor forward(const Tensor& x) override { return forward(x, x, x, Tensor(), false); }
  // query (B, L, E), key/value (B, S, E). attn_mask: bool (true = attend) or additive float,
  // broadcasting to (B, heads, L, S). is_causal: key j > query i masked.
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                 const Tensor& attn_mask, bool is_causal);
  // Causal self-attention of new positions after cached ones, for incremental decoding (no
  // dropout: eval only). x (B, T, E) holds the new positions; keys and values (B, heads, S, D)
  // hold the earlier ones (empty when none) and get the new ones appended in place. T is either all
  // positions (empty cache: the causal packed kernel forward runs, same values) or 1 (one new
  // position attending over every cached one). Calls the modules in the projection slots, so
  // replaced (FP8, quantized, LoRA) projections run as in forward.
  Tensor forward_cached(const Tensor& x, KvBuffer& keys, KvBuffer& values);
  std::string extra_repr() const override;

  int64_t embed_dim() const { return embed_dim_; }
  int64_t num_heads() const { return num_heads_; }
  // The generator attention-weight dropout draws from; null for the default one.
  Generator* generator() const { return gen_; }

  void upgrade_state_dict(const std::string& prefix, StateDict& state) const override;
  // The projection's weight and bias whichever form holds them (in the Linear form: the
  // "in_proj" slot's, while it is a Linear; throws once a plugin replaced it).
  Tensor input_projection_weight() const;
  Tensor input_projection_bias() const;

  Tensor in_proj_weight;  // (3E, E): rows [0,E) query, [E,2E) key, [2E,3E) value; undefined in
  Tensor in_proj_bias;    // the Linear form. (3E) or undefined
  // The module in the "out_proj" slot (forward calls whatever it holds; this typed accessor
  // throws once it holds a replacement of another type).
  std::shared_ptr<Linear> out_proj() const { return child_as<Linear>("out_proj"); }

 private:
  bool in_proj_linear_;
  int64_t embed_dim_, num_heads_;
  double dropout_;
  Generator* gen_;
};

}  // namespace mantissa::nn
