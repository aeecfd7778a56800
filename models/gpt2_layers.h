#pragma once
// The decoder of GPT2LMHeadModel (transformers' GPT2Model): token and learned position
// embeddings, pre-LayerNorm blocks with fused-qkv attention (c_attn) and a GELU MLP, a final
// LayerNorm. Child names are transformers' parameter paths; the Conv1D layers are nn::Linear
// here (weights [out, in]; the loader transposes the files' [in, out]).
#include <memory>
#include <string>

#include "hf_attention.h"
#include "mantissa/models/causal_lm.h"
#include "mantissa/models/hf_config.h"

namespace mantissa::models {

// c_attn (hidden -> 3 hidden: q, k, v), c_proj; dropout on the weights (attn_pdrop) and after
// c_proj (resid_pdrop) while training.
class GPT2Attention : public nn::Module {
 public:
  GPT2Attention(const HfConfig& c, int64_t layer_index, const std::string& path,
                const LinearFactory& make, Generator* dropout_gen);
  Tensor step(const Tensor& x, const LayerStep& s);

 private:
  int64_t heads_, head_dim_;
  double scale_, attention_dropout_;
  Generator* gen_;
};

// c_proj(gelu(c_fc(x))), then dropout (resid_pdrop) while training.
class GPT2MLP : public nn::Module {
 public:
  GPT2MLP(const HfConfig& c, const std::string& path, const LinearFactory& make,
          Generator* dropout_gen);
  Tensor forward(const Tensor& x) override;

 private:
  std::string approximate_;
};

class GPT2Block : public DecoderLayer {
 public:
  GPT2Block(const HfConfig& c, int64_t layer_index, const std::string& path,
            const LinearFactory& make, DType dtype, Generator* dropout_gen);
  Tensor step(const Tensor& x, const LayerStep& s) override;
};

}  // namespace mantissa::models
