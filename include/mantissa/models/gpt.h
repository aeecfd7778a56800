#pragma once
// A byte-level GPT (GPT-2 layout): token + learned position embeddings, pre-LayerNorm causal
// transformer blocks, a final LayerNorm and a linear head over the 256 byte values, optionally
// tied to the token embedding.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mantissa/core/generator.h"
#include "mantissa/nn/embedding.h"
#include "mantissa/nn/transformer.h"

namespace mantissa::models {

struct GPTConfig {
  int64_t vocab = 256;  // bytes
  int64_t context = 128;
  int64_t layers = 6;
  int64_t width = 256;
  int64_t heads = 8;
  double dropout = 0.0;
  bool tie_embeddings = true;
  DType dtype = kFloat32;  // parameters are created in this dtype
  // Training forwards run each block under nn::checkpoint (Hugging Face's
  // gradient_checkpointing): a block keeps only its input until backward, which runs the block
  // again. Same losses and gradients, bit for bit; less memory, about one more block forward
  // per step. Not with FP8 layers (nn/checkpoint.h).
  bool activation_checkpointing = false;
};

class GPT : public nn::Module {
 public:
  // Weights ~ N(0, 0.02) (GPT-2), biases 0, LayerNorms ones/zeros; each block's output
  // projections scaled by 1/sqrt(2 * layers) (GPT-2's residual scaling). Draws from the
  // default generator (see manual_seed); dropout masks from `dropout_gen` when given.
  explicit GPT(const GPTConfig& config, Generator* dropout_gen = nullptr);

  // tokens (B, T) int64 with T <= context -> logits (B, T, vocab).
  Tensor forward(const Tensor& tokens) override;
  // Mean next-token cross-entropy (nats per token) of logits for targets (B, T); computed in
  // fp32 whatever the logits' dtype.
  static Tensor loss(const Tensor& logits, const Tensor& targets);

  // Generates max_new_tokens bytes after `prompt` (no gradient, eval mode restored after):
  // each step feeds the last `context` tokens, divides the last logits by temperature, keeps
  // the top_k largest (top_k <= 0: all) and samples with gen (default generator when null).
  // temperature 0 means greedy (argmax). Returns prompt + generated text. `stop`, when given,
  // is asked before each token; once it returns true sampling ends early and the text generated
  // so far is returned (`mantissa train` stops a long sample at Ctrl-C this way:
  // [] { return train::pending_interrupt().has_value(); }).
  std::string sample(const std::string& prompt, int64_t max_new_tokens, double temperature = 1.0,
                     int64_t top_k = 0, Generator* gen = nullptr,
                     const std::function<bool()>& stop = {});

  const GPTConfig& config() const { return config_; }

  // The modules in the slots "wte", "wpe", "drop", "h<i>" and "ln_f". forward calls whatever a
  // slot holds (see nn/replace.h); these typed accessors throw once a slot holds a replacement
  // of another type. With tied embeddings the head reads wte()->weight, so "wte" must stay an
  // Embedding.
  std::shared_ptr<nn::Embedding> wte() const { return child_as<nn::Embedding>("wte"); }
  std::shared_ptr<nn::Embedding> wpe() const { return child_as<nn::Embedding>("wpe"); }
  std::shared_ptr<nn::TransformerBlock> block(int64_t i) const;
  std::shared_ptr<nn::LayerNorm> ln_f() const { return child_as<nn::LayerNorm>("ln_f"); }

  Tensor lm_head;  // (vocab, width); undefined when tied to wte()->weight

 private:
  static std::string block_name(int64_t i) { return "h" + std::to_string(i); }
  // 0 .. context-1 as int64 on `device`, made once per device (not a module buffer).
  const Tensor& positions_on(const Device& device);

  GPTConfig config_;
  Tensor positions_;
};

}  // namespace mantissa::models
