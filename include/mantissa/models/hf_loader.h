#pragma once
// Loads a Hugging Face model directory (config.json + safetensors weights, one file or shards)
// into a CausalLM, one tensor at a time from memory-mapped files:
//
//   auto model = models::load_hf_model("TinyLlama");                       // fp32
//   auto bf16 = models::load_hf_model("TinyLlama", {.dtype = kBFloat16});  // bf16-true
//   auto q = models::load_hf_model("TinyLlama", {.quantization = "nf4"});  // QLoRA base
//
// Tensors in the files may be F32, F16 or BF16; each is converted to the target dtype as it is
// copied (a file already in that dtype is copied byte for byte, never widened). With a
// quantization mode each projection's weight is quantized as it is read, by the same code the
// BitsandbytesPrecision plugin uses (its bytes equal bitsandbytes'), so the model never exists
// whole in full precision: the peak memory of a load is about the loaded model plus the largest
// tensor in fp32.
//
// Refused with an error naming the file and tensor: no weights file, a missing shard, a tensor
// the model lacks or a model tensor the files lack, a shape that disagrees with config.json, an
// unsupported dtype, a truncated or damaged file. Known non-parameters are skipped by name:
// GPT-2's causal-mask buffers (".attn.bias", ".attn.masked_bias") and the rotary inv_freq of
// older Llama files; a tied model's "lm_head.weight" is accepted only when it equals the
// embedding. docs/pretrained_models.md.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mantissa/core/generator.h"
#include "mantissa/models/causal_lm.h"
#include "mantissa/nn/module.h"

namespace mantissa::models {

struct HfLoadOptions {
  // The parameters' dtype: float32, bfloat16 (bf16-true) or float16. Quantized loads keep the
  // layers they do not quantize in this dtype (float32, as the plugin's, by default).
  DType dtype = kFloat32;
  // "" (none) or a BitsandbytesPrecision mode: nf4, nf4-dq, fp4, fp4-dq, int8, int8-training.
  std::string quantization;
  // Compute dtype of the quantized layers; unset: the plugin's default (bf16 for 4-bit, fp16
  // for int8).
  std::optional<DType> quant_compute_dtype;
  // Projections left unquantized, matched as prefixes of the qualified name, as the plugin's
  // ignore_modules (the output head by default, as transformers' bitsandbytes integration).
  std::vector<std::string> quant_ignore = {"lm_head"};
  bool activation_checkpointing = false;
  Generator* dropout_gen = nullptr;
};

// Reads config.json and the weights of `model_dir`.
std::shared_ptr<CausalLM> load_hf_model(const std::string& model_dir,
                                        const HfLoadOptions& options = {});

// The model's tensors under the keys and in the layout of transformers' files: GPT-2's Conv1D
// weights transposed back to [in, out]; quantized layers as their state_dict holds them
// (bitsandbytes' keys). Tensors share storage with the model except the transposed ones.
nn::StateDict hf_state_dict(const CausalLM& model);

// Writes hf_state_dict(model) to <dir>/model.safetensors (the directory must exist) with the
// metadata transformers writes ({"format": "pt"}). config.json is not written.
void save_hf_weights(const CausalLM& model, const std::string& dir);

// Whether `key` of `architecture` is stored transposed in transformers' files (GPT-2's Conv1D
// weights: attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj).
bool is_conv1d_weight(HfArchitecture architecture, const std::string& key);

}  // namespace mantissa::models
