#pragma once
// CausalLM: a Hugging Face causal language model (Llama, Qwen2, Qwen3, Mistral, GPT-2;
// mantissa/models/hf_config.h) built from mantissa's own layers, with child modules named as
// transformers names its parameters, so state_dict() keys equal the keys of the model's safetensors
// files:
//
//   Llama / Qwen / Mistral: model.embed_tokens, model.layers.<i>.{input_layernorm,
//                  self_attn.{q,k,v,o}_proj, self_attn.{q,k}_norm (Qwen3),
//                  post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head
//   GPT-2:         transformer.{wte, wpe, h.<i>.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
//                  mlp.c_proj}, ln_f}, lm_head (untied only)
//
// Every projection is an nn::Linear in its slot, so the precision machinery applies as to any
// model: quantized replacements (BitsandbytesPrecision, recipes::prepare_model_for_finetuning),
// LoRA targets by name (nn::apply_lora with "q_proj", "c_attn", ...), fp8 Linear replacement,
// autocast, bf16-true (parameters in bf16). GPT-2's Conv1D weights, stored [in, out] in files,
// are held as nn::Linear weights [out, in]: the loader transposes them on load and
// hf_state_dict() transposes them back (mantissa/models/hf_loader.h). A tied head (
// tie_word_embeddings) is the embedding's weight: there is no lm_head module then, as there is
// no lm_head tensor in the file.
//
//   auto model = models::load_hf_model("path/to/model");          // hf_loader.h
//   Tensor logits = model->forward(tokens);                        // (B, T) int64 -> (B, T, V)
#include <functional>
#include <memory>
#include <string>

#include "mantissa/core/generator.h"
#include "mantissa/models/hf_config.h"
#include "mantissa/models/kv_cache.h"
#include "mantissa/nn/module.h"

namespace mantissa::models {

// Makes the projection layer at `qualified_name` ("model.layers.0.self_attn.q_proj") mapping
// in_features to out_features. The default makes an nn::Linear in CausalLMOptions::dtype; the
// loader passes one that reads (and quantizes) the layer's weight from the file as it is built.
using LinearFactory = std::function<std::shared_ptr<nn::Module>(
    const std::string& qualified_name, int64_t in_features, int64_t out_features, bool bias)>;

struct CausalLMOptions {
  DType dtype = kFloat32;  // of the parameters the model creates (embeddings, norms, Linears)
  // Training forwards run each decoder layer under nn::checkpoint (Hugging Face's
  // gradient_checkpointing): same results, less memory, one more layer forward in backward.
  bool activation_checkpointing = false;
  Generator* dropout_gen = nullptr;  // dropout masks (default generator when null)
  LinearFactory make_linear;         // empty: nn::Linear(in, out, bias, dtype)
};

class CausalLM : public nn::Module {
 public:
  // Parameters start as their layers initialise them (the loader overwrites them).
  explicit CausalLM(const HfConfig& config, const CausalLMOptions& options = {});

  // tokens (B, T) int64 -> logits (B, T, vocab) for positions 0 .. T-1, causal attention.
  Tensor forward(const Tensor& tokens) override;
  // tokens (B, T) at positions cache.length() .. cache.length() + T - 1: appends their keys and
  // values to `cache` and attends over the whole cache. With an empty cache this equals
  // forward(tokens). Never checkpointed.
  Tensor forward(const Tensor& tokens, KvCache& cache);

  const HfConfig& config() const { return config_; }
  const CausalLMOptions& options() const { return options_; }
  void set_activation_checkpointing(bool on) { options_.activation_checkpointing = on; }

  // The token embedding's weight (vocab, hidden): what a tied head multiplies by.
  Tensor input_embedding_weight() const;
  // The decoder layers ("model.layers" or "transformer.h"), in order.
  nn::Module& decoder_layers() const;
  // The transformers parameter path prefix of decoder layer i ("model.layers.3").
  std::string layer_path(int64_t i) const;

 private:
  void check_tokens(const Tensor& tokens) const;
  // Token (+ GPT-2 position) embeddings of tokens at positions offset .. offset + T - 1.
  Tensor embed(const Tensor& tokens, int64_t offset);
  // Final norm and the vocabulary projection.
  Tensor head(const Tensor& hidden);

  HfConfig config_;
  CausalLMOptions options_;
};

}  // namespace mantissa::models
