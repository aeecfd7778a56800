#pragma once
// Model directories `mantissa finetune` writes, which transformers' from_pretrained loads:
// config.json (and generation_config.json) copied from the source directory, model.safetensors
// in the source's dtype (config.json's torch_dtype; float32 when it has none) under
// transformers' keys, and the tokenizer files.
#include <string>

#include "mantissa/models/causal_lm.h"
#include "mantissa/models/peft_adapter.h"
#include "mantissa/nn/module.h"

namespace mantissa::recipes {

// Whether `name` is a file `mantissa finetune` writes into its --output-dir or --merge-to: a peft
// adapter's (adapter_model.safetensors, adapter_config.json) or a model directory's
// (model.safetensors, config.json, generation_config.json and the tokenizer files below).
bool written_by_finetune(const std::string& name);

// Copies the tokenizer files the source directory has (tokenizer.json, tokenizer_config.json,
// special_tokens_map.json, vocab.json, merges.txt, tokenizer.model) and generation_config.json.
void copy_tokenizer_files(const std::string& source_dir, const std::string& out_dir);

// Writes `model` (no adapters, no quantized layers) as a model directory at out_dir (created),
// beside the source's config.json and tokenizer files. Throws naming the layer when the model
// holds an adapter or a quantized weight.
void write_hf_model_directory(const models::CausalLM& model, const std::string& source_dir,
                              const std::string& out_dir);

// peft's merge_and_unload to a directory: loads the source model in float32, wraps the adapted
// layers as `config` says, loads `adapters` (nn::lora_state_dict keys), folds them into the
// weights and writes the model directory at out_dir.
void write_merged_model_directory(const std::string& source_dir,
                                  const models::PeftAdapterConfig& config,
                                  const nn::StateDict& adapters, const std::string& out_dir);

}  // namespace mantissa::recipes
