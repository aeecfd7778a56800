// MultiheadAttention: one fused (3E, E) projection, heads split by reshape/transpose, the
// attention itself in scaled_dot_product_attention, heads merged and projected out. Causal or
// unmasked self-attention without dropout goes to the packed fused kernel instead, which reads
// the heads from the projection and writes them merged (no split/merge copies).
#include "mantissa/nn/attention.h"
#include "mantissa/core/default_dtype.h"

#include "mantissa/nn/functional.h"
#include "mantissa/nn/init.h"
#include "mantissa/ops/attention.h"
#include "mantissa/ops/shape_ops.h"
#include "ops/attention_fused.h"

namespace mantissa::nn {

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout,
                                       bool with_bias, std::optional<DType> requested_dtype,
                                       Generator* gen, bool in_proj_linear)
    : Module("MultiheadAttention"),
      in_proj_linear_(in_proj_linear),
      embed_dim_(embed_dim),
      num_heads_(num_heads),
      dropout_(dropout),
      gen_(gen) {
  const DType dtype = requested_dtype.value_or(get_default_dtype());
  MANTISSA_CHECK(embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0, "MultiheadAttention",
                 "embed_dim ({}) must be positive and divisible by num_heads ({})", embed_dim,
                 num_heads);
  MANTISSA_CHECK(dropout >= 0 && dropout <= 1, "MultiheadAttention",
                 "dropout must be in [0, 1], got {}", dropout);
  if (in_proj_linear) {
    // The Linear draws its own initial values from a throwaway generator; the default one then
    // draws exactly what the parameter form draws (xavier_uniform_ of a (3E, E) weight, zero
    // bias), so both forms start from the same values and leave the generator in one state.
    Generator scratch(0);
    auto in_proj = register_module(
        "in_proj", std::make_shared<Linear>(embed_dim, 3 * embed_dim, with_bias, dtype, &scratch));
    init::xavier_uniform_(in_proj->weight);
    if (with_bias) init::zeros_(in_proj->bias);
  } else {
    in_proj_weight = register_parameter("in_proj_weight", empty({3 * embed_dim, embed_dim}, dtype));
    init::xavier_uniform_(in_proj_weight);
    if (with_bias) in_proj_bias = register_parameter("in_proj_bias", zeros({3 * embed_dim}, dtype));
  }
  auto proj =
      register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, with_bias, dtype));
  if (with_bias) init::zeros_(proj->bias);
}

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const Tensor& attn_mask, bool is_causal) {
  const int64_t E = embed_dim_, H = num_heads_, D = E / H;
  for (const Tensor* t : {&query, &key, &value}) {
    MANTISSA_CHECK(t->dim() == 3 && t->size(2) == E, "MultiheadAttention",
                   "inputs must be (batch, seq, {}), got shape {}", E, shape_str(t->shape()));
  }
  const int64_t B = query.size(0), L = query.size(1), S = key.size(1);
  const double p = is_training() ? dropout_ : 0.0;
  const bool self = query.is_same(key) && key.is_same(value);
  MANTISSA_CHECK(self || !in_proj_linear_, "MultiheadAttention",
                 "the in_proj_linear form does self-attention only: pass one tensor as query, "
                 "key and value");
  // One GEMM for all three projections: the module in the "in_proj" slot, or the parameters.
  auto project_all = [&] {
    return in_proj_linear_ ? child("in_proj")->forward(query)
                           : functional::linear(query, in_proj_weight, in_proj_bias);
  };
  if (self && !attn_mask.defined() && p == 0) {
    return child("out_proj")->forward(detail::packed_self_attention(project_all(), H, is_causal));
  }
  Tensor q, k, v;
  if (self) {
    Tensor qkv = project_all().view({B, L, 3, H, D}).permute({2, 0, 3, 1, 4});  // (3, B, H, L, D)
    q = qkv.select(0, 0);
    k = qkv.select(0, 1);
    v = qkv.select(0, 2);
  } else {
    auto proj = [&](const Tensor& x, int64_t part, int64_t len) {
      Tensor w = in_proj_weight.narrow(0, part * E, E);
      Tensor b = in_proj_bias.defined() ? in_proj_bias.narrow(0, part * E, E) : Tensor();
      return functional::linear(x, w, b).view({B, len, H, D}).transpose(1, 2);
    };
    q = proj(query, 0, L);
    k = proj(key, 1, S);
    v = proj(value, 2, S);
  }
  Tensor o = scaled_dot_product_attention(q, k, v, attn_mask, p, is_causal, std::nullopt, gen_);
  return child("out_proj")->forward(o.transpose(1, 2).reshape({B, L, E}));
}

Tensor MultiheadAttention::forward_cached(const Tensor& x, KvBuffer& keys, KvBuffer& values) {
  const int64_t E = embed_dim_, H = num_heads_, D = E / H;
  MANTISSA_CHECK(x.dim() == 3 && x.size(2) == E, "MultiheadAttention",
                 "inputs must be (batch, seq, {}), got shape {}", E, shape_str(x.shape()));
  MANTISSA_CHECK(!is_training() || dropout_ == 0, "MultiheadAttention",
                 "forward_cached runs without attention dropout: call eval() first");
  const int64_t B = x.size(0), T = x.size(1);
  const bool empty_cache = !keys.defined();
  MANTISSA_CHECK(empty_cache || T == 1, "MultiheadAttention",
                 "forward_cached takes one new position after cached ones, got {}", T);
  MANTISSA_CHECK(empty_cache || (keys.view().size(0) == B && keys.view().size(1) == H &&
                                 keys.view().size(3) == D && values.length() == keys.length()),
                 "MultiheadAttention", "cached keys {} and values {} must be (batch {}, {}, S, {})",
                 shape_str(keys.view().shape()),
                 values.defined() ? shape_str(values.view().shape()) : std::string("none"), B, H,
                 D);
  const Tensor qkv = in_proj_linear_ ? child("in_proj")->forward(x)
                                     : functional::linear(x, in_proj_weight, in_proj_bias);
  const Tensor parts = qkv.view({B, T, 3, H, D}).permute({2, 0, 3, 1, 4});  // (3, B, H, T, D)
  keys.append(parts.select(0, 1));
  values.append(parts.select(0, 2));
  if (empty_cache)
    return child("out_proj")->forward(detail::packed_self_attention(qkv, H, /*is_causal=*/true));
  // The newest position sees every key: no mask.
  Tensor o = scaled_dot_product_attention(parts.select(0, 0), keys.view(), values.view(), Tensor(),
                                          0.0, false, std::nullopt, gen_);
  return child("out_proj")->forward(o.transpose(1, 2).reshape({B, T, E}));
}

Tensor MultiheadAttention::input_projection_weight() const {
  return in_proj_linear_ ? child_as<Linear>("in_proj")->weight : in_proj_weight;
}

Tensor MultiheadAttention::input_projection_bias() const {
  return in_proj_linear_ ? child_as<Linear>("in_proj")->bias : in_proj_bias;
}

void MultiheadAttention::upgrade_state_dict(const std::string& prefix, StateDict& state) const {
  if (!in_proj_linear_) return;
  for (const char* part : {"weight", "bias"}) {
    const std::string old_key = prefix + "in_proj_" + part;
    const std::string new_key = prefix + "in_proj." + part;
    if (state.contains(old_key) && !state.contains(new_key)) {
      state.insert(new_key, state.at(old_key));
      state.erase(old_key);
    }
  }
}

std::string MultiheadAttention::extra_repr() const {
  return fmt::format("embed_dim={}, num_heads={}, dropout={}", embed_dim_, num_heads_, dropout_);
}

}  // namespace mantissa::nn
