// Telling a fine-tune's checkpoint by its record (see finetune_record.h).
#include "mantissa/recipes/finetune_record.h"

#include <fmt/format.h>

#include <algorithm>

#include "mantissa/core/untrusted_text.h"
#include "mantissa/io/output_path.h"

namespace mantissa::recipes {
namespace {

// The recorded paths are quoted whole (escaped only): a message gives them to pass again.
constexpr size_t kPathMaxBytes = 4096;

// A string entry of the record; "" when it is absent or not a string (damage names nothing).
std::string entry(const nlohmann::json& hparams, const char* key) {
  const auto it = hparams.find(key);
  return it != hparams.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

nlohmann::json finetune_hparams(const std::string& architecture, const std::string& model_dir,
                                const std::string& output_dir, const std::string& merge_to) {
  nlohmann::json j = {{"task", kFinetuneTask},
                      {"architecture", architecture},
                      {"model_dir", io::absolute_path(model_dir)},
                      {"output_dir", io::absolute_path(output_dir)}};
  if (!merge_to.empty()) j["merge_to"] = io::absolute_path(merge_to);
  return j;
}

void add_lora_hparams(nlohmann::json& hparams, int64_t rank, double alpha, double dropout) {
  hparams["lora-rank"] = rank;
  hparams["lora-alpha"] = alpha;
  hparams["lora-dropout"] = dropout;
}

std::optional<FinetuneRecord> finetune_record(const io::SafetensorsHeader& header,
                                              const nlohmann::json& hparams) {
  if (hparams.is_object() && hparams.contains("task")) {
    if (entry(hparams, "task") != kFinetuneTask) return std::nullopt;
    return FinetuneRecord{.recorded = true,
                          .architecture = entry(hparams, "architecture"),
                          .model_dir = entry(hparams, "model_dir"),
                          .output_dir = entry(hparams, "output_dir"),
                          .merge_to = entry(hparams, "merge_to")};
  }
  const bool hf_weights =
      std::any_of(header.tensors.begin(), header.tensors.end(), [](const auto& t) {
        return t.name.ends_with("embed_tokens.weight") ||
               t.name.ends_with("transformer.wte.weight");
      });
  if (!hf_weights) return std::nullopt;
  return FinetuneRecord{};
}

std::string describe_finetune_checkpoint(const FinetuneRecord& record) {
  if (!record.recorded) {
    return "a `mantissa finetune` checkpoint or output (a Hugging Face language model's weights)";
  }
  return fmt::format("a checkpoint of `mantissa finetune` ({} from {})",
                     escape_untrusted(record.architecture),
                     quote_untrusted(record.model_dir, kPathMaxBytes));
}

std::string describe_other_checkpoint(const nlohmann::json& hparams) {
  const std::string model = hparams.is_object() ? entry(hparams, "model") : std::string();
  if (!model.empty())
    return fmt::format("a checkpoint of `mantissa train --model {}`", escape_untrusted(model));
  return "no fine-tune's checkpoint (it records no `mantissa finetune` run and holds no Hugging "
         "Face language model's weights)";
}

}  // namespace mantissa::recipes
