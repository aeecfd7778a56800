#pragma once
// The decoder of LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM and MistralForCausalLM
// (transformers' LlamaModel and its variants): embeddings, pre-RMSNorm decoder layers with
// rotary grouped-query attention and a SwiGLU MLP, a final RMSNorm. The variants differ only in
// HfConfig's fields (biases, qk_norm, sliding_window). Child names are transformers' parameter
// paths.
#include <memory>
#include <string>

#include "hf_attention.h"
#include "hf_rotary.h"
#include "mantissa/models/causal_lm.h"
#include "mantissa/models/hf_config.h"

namespace mantissa::models {

// q_proj, k_proj, v_proj, o_proj; with qk_norm (Qwen3) also q_norm and k_norm, RMSNorms over
// each head's head_dim applied after the projections and before the rotary embedding.
class LlamaAttention : public nn::Module {
 public:
  LlamaAttention(const HfConfig& c, const std::string& path, const LinearFactory& make,
                 std::shared_ptr<RotaryTable> rotary, DType dtype, Generator* dropout_gen);
  Tensor step(const Tensor& x, const LayerStep& s);

 private:
  int64_t heads_, kv_heads_, head_dim_;
  int64_t window_;  // HfConfig::sliding_window
  bool qk_norm_;
  double dropout_;
  std::shared_ptr<RotaryTable> rotary_;
  Generator* gen_;
};

// down_proj(silu(gate_proj(x)) * up_proj(x)).
class LlamaMLP : public nn::Module {
 public:
  LlamaMLP(const HfConfig& c, const std::string& path, const LinearFactory& make);
  Tensor forward(const Tensor& x) override;
};

class LlamaDecoderLayer : public DecoderLayer {
 public:
  LlamaDecoderLayer(const HfConfig& c, const std::string& path, const LinearFactory& make,
                    std::shared_ptr<RotaryTable> rotary, DType dtype, Generator* dropout_gen);
  Tensor step(const Tensor& x, const LayerStep& s) override;
};

}  // namespace mantissa::models
