#pragma once
// The config.json of a Hugging Face causal-LM directory, read into what mantissa's CausalLM
// (mantissa/models/causal_lm.h) implements. Five architectures:
//
//   LlamaForCausalLM   RMSNorm, rotary embeddings (rotate_half layout; rope types default,
//                      linear, llama3), SwiGLU MLP, grouped-query attention, optional biases
//                      (attention_bias on q/k/v/o, mlp_bias), tied or untied lm_head
//   Qwen2ForCausalLM   Llama with biases on q/k/v (none on o), full attention only
//   Qwen3ForCausalLM   Llama (attention_bias on q/k/v/o) with an RMSNorm over each head of q
//                      and k (q_norm, k_norm) before the rotary embedding, full attention only
//   MistralForCausalLM Llama with a sliding-window causal mask (sliding_window) on every layer
//   GPT2LMHeadModel    learned positions, LayerNorm, fused qkv (c_attn), GELU, Conv1D weights
//                      stored [in, out], tied (or untied) head
//
// Every field that changes the model's math is either implemented or refused by name: an
// unknown architecture, another rope type, a Qwen sliding window in use, partial rotary factors,
// another activation, quantization_config, auto_map (custom code), and any key this reader does
// not know. Keys that do not change the forward (transformers_version, use_cache,
// initializer_range, generation defaults, label maps, ...) are accepted. docs/pretrained_models.md.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mantissa/core/dtype.h"

namespace mantissa::models {

enum class HfArchitecture { kLlama, kQwen2, kGpt2, kQwen3, kMistral };

// "LlamaForCausalLM", "Qwen2ForCausalLM", "GPT2LMHeadModel", "Qwen3ForCausalLM",
// "MistralForCausalLM".
std::string to_string(HfArchitecture architecture);

// Rotary embedding frequencies (transformers' rope_parameters, or rope_theta + rope_scaling in
// files written before transformers 5).
struct RopeConfig {
  enum class Type { kDefault, kLinear, kLlama3 };
  Type type = Type::kDefault;
  double theta = 10000.0;
  double factor = 1.0;  // linear, llama3
  // llama3 only:
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct HfConfig {
  HfArchitecture architecture = HfArchitecture::kLlama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // GPT-2: n_inner, 4 * n_embd when null
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;      // GPT-2: num_attention_heads
  int64_t head_dim = 0;                 // hidden_size / num_attention_heads unless given
  int64_t max_position_embeddings = 0;  // GPT-2: n_positions (the wpe table's rows)
  double norm_eps = 1e-6;               // rms_norm_eps, GPT-2's layer_norm_epsilon
  RopeConfig rope;                      // Llama, Qwen2, Qwen3, Mistral
  bool tie_word_embeddings = false;     // true: no lm_head tensor, the head is the embedding
  bool qkv_bias = false;  // Llama, Qwen3: attention_bias; Qwen2: always; GPT-2: always
  bool o_bias = false;    // Llama, Qwen3: attention_bias; GPT-2: always
  bool mlp_bias = false;  // Llama: mlp_bias; GPT-2: always
  bool qk_norm = false;   // Qwen3: RMSNorm (norm_eps) over each head of q and k
  // Mistral: query i sees keys i - sliding_window + 1 .. i (itself and the sliding_window - 1
  // before it, as transformers' sliding_window_overlay); 0: every earlier key.
  int64_t sliding_window = 0;
  // "silu" (Llama, Qwen, Mistral); GPT-2: "gelu_tanh" (gelu_new, gelu_pytorch_tanh, gelu_fast is
  // not accepted) or "gelu" (exact erf form).
  std::string activation = "silu";
  double attention_dropout = 0.0;  // Llama/Qwen/Mistral attention_dropout; GPT-2 attn_pdrop
  double residual_dropout = 0.0;   // GPT-2 resid_pdrop (after c_proj of attention and MLP)
  double embedding_dropout = 0.0;  // GPT-2 embd_pdrop
  bool scale_attn_weights = true;  // GPT-2: scores / sqrt(head_dim) (false: unscaled)
  bool scale_attn_by_inverse_layer_idx = false;  // GPT-2: scores also / (layer index + 1)
  std::optional<DType> torch_dtype;              // "torch_dtype" / "dtype": the weights' dtype
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // an int or a list in the file
  std::optional<int64_t> pad_token_id;
};

// Parses config.json text; `source` names it in errors ("model/config.json"). Throws
// mantissa::Error naming the source and the field for a missing or mistyped field, a value out
// of range, an unsupported architecture or feature, or an unknown key.
HfConfig parse_hf_config(const std::string& json_text, const std::string& source);

// Reads <model_dir>/config.json.
HfConfig load_hf_config(const std::string& model_dir);

}  // namespace mantissa::models
