#pragma once
// The decoder of LlamaForCausalLM and Qwen2ForCausalLM (transformers' LlamaModel): embeddings,
// pre-RMSNorm decoder layers with rotary grouped-query attention and a SwiGLU MLP, a final
// RMSNorm. Child names are transformers' parameter paths.
#include <memory>
#include <string>

#include "hf_attention.h"
#include "hf_rotary.h"
#include "mantissa/models/causal_lm.h"
#include "mantissa/models/hf_config.h"

namespace mantissa::models {

// q_proj, k_proj, v_proj, o_proj.
class LlamaAttention : public nn::Module {
 public:
  LlamaAttention(const HfConfig& c, const std::string& path, const LinearFactory& make,
                 std::shared_ptr<RotaryTable> rotary, Generator* dropout_gen);
  Tensor step(const Tensor& x, const LayerStep& s);

 private:
  int64_t heads_, kv_heads_, head_dim_;
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
