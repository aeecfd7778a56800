#pragma once
// The tiny Hugging Face model directories of tests/fixtures/hf/models (written by
// tests/fixtures/hf/make_model_fixtures.py) and their transformers reference outputs.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "mantissa/io/safetensors.h"

namespace mantissa::testing {

inline const std::vector<std::string>& hf_fixture_names() {
  static const std::vector<std::string> names = {
      "llama_tied_llama3", "llama_linear_sharded", "qwen2_bf16", "gpt2", "qwen3", "mistral"};
  return names;
}

inline std::string hf_fixture_dir(const std::string& name) {
  return std::string(MANTISSA_FIXTURES_DIR) + "/hf/models/" + name;
}

// A file or model of tests/fixtures/hf/finetune (the fine-tuning fixtures: tiny models, their
// data and peft adapters).
inline std::string hf_finetune_fixture(const std::string& name) {
  return std::string(MANTISSA_FIXTURES_DIR) + "/hf/finetune/" + name;
}

// "input_ids" (2, 10) int64, "logits" (2, 10, 320) fp32, "greedy" (2, 22) int64, "loss" (1)
// the causal-LM loss of input_ids as their own labels, and each parameter's gradient of it
// ("grad.<file key>", in the file's layout).
struct HfReference {
  Tensor input_ids, logits, greedy, loss;
  std::map<std::string, Tensor> grads;  // by file key
};

inline HfReference hf_reference(const std::string& name) {
  const io::SafetensorsFile f =
      io::load_safetensors(hf_fixture_dir(name) + "/reference.safetensors");
  HfReference r;
  for (const auto& [key, t] : f.tensors) {
    if (key == "input_ids") r.input_ids = t;
    if (key == "logits") r.logits = t;
    if (key == "greedy") r.greedy = t;
    if (key == "loss") r.loss = t;
    if (key.rfind("grad.", 0) == 0) r.grads[key.substr(5)] = t;
  }
  return r;
}

// Copies a fixture directory's files into `dest` (an existing directory).
inline void copy_hf_fixture(const std::string& name, const std::string& dest) {
  for (const auto& e : std::filesystem::directory_iterator(hf_fixture_dir(name)))
    std::filesystem::copy_file(e.path(), std::filesystem::path(dest) / e.path().filename(),
                               std::filesystem::copy_options::overwrite_existing);
}

}  // namespace mantissa::testing
