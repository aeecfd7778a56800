#include "mantissa/nn/transformer.h"
#include "mantissa/core/default_dtype.h"

#include <cmath>

#include "mantissa/nn/functional.h"
#include "mantissa/ops/elementwise.h"

namespace mantissa::nn {

TransformerMLP::TransformerMLP(int64_t embed_dim, int64_t hidden_dim, double dropout,
                               std::string approximate, std::optional<DType> requested_dtype,
                               Generator* gen)
    : Module("TransformerMLP"), approximate_(std::move(approximate)) {
  const DType dtype = requested_dtype.value_or(get_default_dtype());
  register_module("fc1", std::make_shared<Linear>(embed_dim, hidden_dim, true, dtype));
  register_module("fc2", std::make_shared<Linear>(hidden_dim, embed_dim, true, dtype));
  register_module("drop", std::make_shared<Dropout>(dropout, gen));
}

Tensor TransformerMLP::forward(const Tensor& x) {
  Tensor h = functional::gelu(child("fc1")->forward(x), approximate_);
  return child("drop")->forward(child("fc2")->forward(h));
}

TransformerBlock::TransformerBlock(const TransformerBlockOptions& o)
    : Module("TransformerBlock"), causal_(o.causal) {
  MANTISSA_CHECK(o.mlp_ratio > 0, "TransformerBlock", "mlp_ratio must be positive, got {}",
                 o.mlp_ratio);
  const auto hidden = static_cast<int64_t>(std::lround(o.mlp_ratio * o.embed_dim));
  register_module("ln1", std::make_shared<LayerNorm>(std::vector<int64_t>{o.embed_dim}, 1e-5, true,
                                                     true, o.dtype));
  register_module("attn",
                  std::make_shared<MultiheadAttention>(o.embed_dim, o.num_heads, o.dropout, true,
                                                       o.dtype, o.gen, o.in_proj_linear));
  register_module("attn_drop", std::make_shared<Dropout>(o.dropout, o.gen));
  register_module("ln2", std::make_shared<LayerNorm>(std::vector<int64_t>{o.embed_dim}, 1e-5, true,
                                                     true, o.dtype));
  register_module("mlp", std::make_shared<TransformerMLP>(o.embed_dim, hidden, o.dropout,
                                                          o.gelu_approximate, o.dtype, o.gen));
}

Tensor TransformerBlock::forward(const Tensor& x) {
  Tensor h = child("ln1")->forward(x);
  Tensor a = child("attn_drop")->forward(attn()->forward(h, h, h, Tensor(), causal_));
  Tensor y = add(x, a);
  return add(y, child("mlp")->forward(child("ln2")->forward(y)));
}

Tensor TransformerBlock::forward_cached(const Tensor& x, KvBuffer& keys, KvBuffer& values) {
  MANTISSA_CHECK(causal_, "TransformerBlock", "forward_cached is for causal blocks");
  Tensor h = child("ln1")->forward(x);
  Tensor a = child("attn_drop")->forward(attn()->forward_cached(h, keys, values));
  Tensor y = add(x, a);
  return add(y, child("mlp")->forward(child("ln2")->forward(y)));
}

}  // namespace mantissa::nn
