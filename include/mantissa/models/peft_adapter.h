#pragma once
// peft's LoRA adapter directories: adapter_config.json and adapter_model.safetensors, as
// peft's save_pretrained writes them and PeftModel.from_pretrained reads them.
//
//   adapter_model.safetensors   "base_model.model.<module path>.lora_A.weight" [r, in] and
//                               ".lora_B.weight" [out, r], in the adapters' dtype
//   adapter_config.json         peft_type LORA, r, lora_alpha, lora_dropout, target_modules,
//                               bias "none", task_type CAUSAL_LM, fan_in_fan_out,
//                               base_model_name_or_path, ...
//
// The module paths are the model's own (a models::CausalLM names its layers as transformers
// does), so the files carry over both ways. What changes the math and is not implemented
// (use_rslora, use_dora, rank or alpha patterns, bias other than "none", modules_to_save,
// layers_to_transform) is refused naming the field. target_modules is a list of names or, as
// peft allows, one string: a regular expression that a layer's whole name must match.
#include <string>
#include <vector>

#include "mantissa/nn/lora.h"
#include "mantissa/nn/module.h"

namespace mantissa::models {

inline constexpr const char* kPeftConfigFile = "adapter_config.json";
inline constexpr const char* kPeftWeightsFile = "adapter_model.safetensors";
// peft's prefix of every key in the weights file.
inline constexpr const char* kPeftKeyPrefix = "base_model.model.";

struct PeftAdapterConfig {
  int64_t r = 8;
  double lora_alpha = 8;
  double lora_dropout = 0;
  std::vector<std::string> target_modules;  // layer names (the last part of a module path)
  std::string target_regex;     // target_modules given as a string (then the list is empty)
  bool fan_in_fan_out = false;  // GPT-2's Conv1D layers
  std::string base_model_name_or_path;
};

// Reads DIR/adapter_config.json; throws mantissa::Error naming the file and field when it is
// missing, not JSON, not a LoRA adapter, or asks for something not implemented.
PeftAdapterConfig read_peft_adapter_config(const std::string& dir);

// The adapters `config` describes, as apply_lora takes them.
nn::LoraConfig to_lora_config(const PeftAdapterConfig& config);

// Writes DIR/adapter_config.json and DIR/adapter_model.safetensors from the LoRALinear layers
// under `model` (creating DIR). Throws when the model holds no adapter.
void save_peft_adapter(const nn::Module& model, const PeftAdapterConfig& config,
                       const std::string& dir);

// Wraps the layers config's target_modules name in LoRA adapters (nn::apply_lora with the
// config's r, alpha, dropout) and loads DIR's weights into them, cast to the adapters' dtype.
// Every adapter of the model must be in the file and every tensor of the file must be an
// adapter of the model, of its shape; otherwise throws naming the file and tensor. Returns the
// wrapped layers' names.
std::vector<std::string> load_peft_adapter(nn::Module& model, const std::string& dir);

}  // namespace mantissa::models
