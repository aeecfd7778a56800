#pragma once
// What the decoder layers of CausalLM share: the position and cache slot of a forward step, and
// causal attention with grouped-query heads over cached and new keys.
#include <cstdint>

#include "mantissa/core/generator.h"
#include "mantissa/core/tensor.h"
#include "mantissa/nn/kv_buffer.h"
#include "mantissa/nn/module.h"

namespace mantissa::models {

// One layer's view of a forward step: the position of its first token and, for incremental
// decoding, the layer's cached keys and values (appended to in place), or null.
struct LayerStep {
  int64_t offset = 0;
  nn::KvBuffer* keys = nullptr;
  nn::KvBuffer* values = nullptr;
};

// q (B, H, T, D), k and v (B, H_kv, T, D) of the new positions. Appends k and v to the step's
// cache (when it has one) and returns softmax(q k^T * scale + causal mask) v as (B, T, H * D):
// query t (at position p = offset + t) sees keys 0 .. p, or with a sliding window W > 0 keys
// p - W + 1 .. p (itself and the W - 1 before it, as transformers' sliding_window_overlay).
// H_kv must divide H; head h reads key/value head h / (H / H_kv), as transformers' repeat_kv.
Tensor causal_attention(const Tensor& q, Tensor k, Tensor v, const LayerStep& step, double scale,
                        double dropout_p, Generator* gen, int64_t window = 0);

// A decoder layer: forward(x) is a step at position 0 without a cache (what nn::checkpoint
// calls), step() the general form.
class DecoderLayer : public nn::Module {
 public:
  using nn::Module::Module;
  virtual Tensor step(const Tensor& x, const LayerStep& s) = 0;
  Tensor forward(const Tensor& x) override { return step(x, LayerStep{}); }
};

}  // namespace mantissa::models
