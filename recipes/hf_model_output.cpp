// Model directories for transformers: the source's config and tokenizer files,
// the weights in the source dtype.
#include "mantissa/recipes/hf_model_output.h"

#include <filesystem>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/io/output_path.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/models/hf_config.h"
#include "mantissa/models/hf_loader.h"
#include "mantissa/nn/lora.h"

namespace mantissa::recipes {
namespace {

namespace fs = std::filesystem;

void copy_file_to(const fs::path& from, const std::string& out_dir) {
  std::error_code ec;
  fs::copy_file(from, fs::path(out_dir) / from.filename(), fs::copy_options::overwrite_existing,
                ec);
  MANTISSA_CHECK(!ec, "finetune", "cannot copy {} to {}: {}", quote_untrusted(from.string()),
                 quote_untrusted(out_dir), ec.message());
}

bool is_fp8_scaling_state(const std::string& name) {
  const std::string_view leaf = std::string_view(name).substr(name.rfind('.') + 1);
  return leaf == fp8::kScaleBufferName || leaf == fp8::kAmaxHistoryBufferName;
}

// What copy_tokenizer_files copies when the source has it.
constexpr std::array<const char*, 7> kTokenizerFiles = {
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
    "merges.txt",     "tokenizer.model",       "generation_config.json"};

}  // namespace

bool written_by_finetune(const std::string& name) {
  if (name == models::kPeftConfigFile || name == models::kPeftWeightsFile ||
      name == "model.safetensors" || name == "config.json")
    return true;
  return std::find(kTokenizerFiles.begin(), kTokenizerFiles.end(), name) != kTokenizerFiles.end();
}

void copy_tokenizer_files(const std::string& source_dir, const std::string& out_dir) {
  for (const char* name : kTokenizerFiles) {
    const fs::path from = fs::path(source_dir) / name;
    if (fs::is_regular_file(from)) copy_file_to(from, out_dir);
  }
}

void write_hf_model_directory(const models::CausalLM& model, const std::string& source_dir,
                              const std::string& out_dir) {
  for (const auto& [name, m] : model.named_modules()) {
    MANTISSA_CHECK(dynamic_cast<const nn::LoRALinear*>(m) == nullptr, "finetune",
                   "layer '{}' holds a LoRA adapter: merge it first (a model "
                   "directory holds "
                   "plain weights)",
                   name);
  }
  const DType dtype = model.config().torch_dtype.value_or(kFloat32);
  io::NamedTensors tensors;
  for (const auto& [key, t] : models::hf_state_dict(model)) {
    if (is_fp8_scaling_state(key)) continue;
    MANTISSA_CHECK(t.dtype().is_floating_point(), "finetune",
                   "tensor '{}' is {} (a quantized layer); a model directory "
                   "holds its weights in "
                   "{}",
                   key, t.dtype().name(), dtype.name());
    tensors.emplace_back(key, t.detach().to(dtype).contiguous());
  }
  io::prepare_output_dir(out_dir, "the output directory");
  io::save_safetensors((fs::path(out_dir) / "model.safetensors").string(), tensors,
                       {{"format", "pt"}});
  copy_file_to(fs::path(source_dir) / "config.json", out_dir);
  copy_tokenizer_files(source_dir, out_dir);
}

void write_merged_model_directory(const std::string& source_dir,
                                  const models::PeftAdapterConfig& config,
                                  const nn::StateDict& adapters, const std::string& out_dir) {
  const std::shared_ptr<models::CausalLM> model = models::load_hf_model(source_dir);
  nn::apply_lora(*model, models::to_lora_config(config));
  const nn::StateDict own = nn::lora_state_dict(*model);
  for (const auto& [name, t] : own) {
    MANTISSA_CHECK(adapters.contains(name), "finetune",
                   "the adapters lack '{}' of the model's adapted layers", name);
  }
  MANTISSA_CHECK(own.size() == adapters.size(), "finetune",
                 "the adapters hold {} tensors, the model's adapted layers {}", adapters.size(),
                 own.size());
  model->load_state_dict(adapters, /*strict=*/false);
  nn::merge_and_unload(*model);
  write_hf_model_directory(*model, source_dir, out_dir);
}

}  // namespace mantissa::recipes
