#pragma once
// Which command's run wrote a checkpoint. A `mantissa finetune` checkpoint records, in its
// hyper_parameters, "task": "finetune" with the model directory's architecture and path and the
// run's output directories (finetune_hparams); a `mantissa train` checkpoint records "model"
// (mlp, cnn, vit, gpt). A fine-tune's checkpoint from before that record is told by its tensors:
// a Hugging Face causal LM's (Llama's and Qwen2's embed_tokens, GPT-2's transformer.wte;
// models/causal_lm.h), which no model of `mantissa train` has. eval refuses a fine-tune's
// checkpoint, train's --resume and --init-from refuse one, and finetune's --resume takes only
// one (and checks its architecture and output directories against the run's).
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "mantissa/io/safetensors.h"

namespace mantissa::recipes {

inline constexpr const char* kFinetuneTask = "finetune";

// What a fine-tune's checkpoint says of the run that wrote it. The paths are absolute, as that
// run resolved them; "" where it recorded none (no --merge-to), or for an older checkpoint.
struct FinetuneRecord {
  bool recorded = false;     // false: an older checkpoint, told by its tensor names
  std::string architecture;  // "LlamaForCausalLM", "Qwen2ForCausalLM", "GPT2LMHeadModel"
  std::string model_dir;
  std::string output_dir;
  std::string merge_to;
};

// The hyper_parameters of a fine-tune's LanguageModel (train::TrainModule::
// save_hyperparameters), which its checkpoints store: "task", "architecture", "model_dir",
// "output_dir" and, when given, "merge_to" (paths made absolute).
nlohmann::json finetune_hparams(const std::string& architecture, const std::string& model_dir,
                                const std::string& output_dir, const std::string& merge_to);

// The adapters' settings beside the record, by `mantissa train`'s keys ("lora-rank", "lora-alpha",
// "lora-dropout"), which finetune's --resume checks (check_resumed_lora, init_from_check.h).
void add_lora_hparams(nlohmann::json& hparams, int64_t rank, double alpha, double dropout);

// The record of the run that wrote `header` when it is a fine-tune's; nullopt for any other
// file. `hparams` is what recorded_model_hparams (checkpoint_metadata.h) read from it. The
// strings come from the file: quote them (quote_untrusted) in messages.
std::optional<FinetuneRecord> finetune_record(const io::SafetensorsHeader& header,
                                              const nlohmann::json& hparams);

// "a checkpoint of `mantissa finetune` (LlamaForCausalLM from '/m')", or, for an older one,
// "a `mantissa finetune` checkpoint or output (a Hugging Face language model's weights)".
std::string describe_finetune_checkpoint(const FinetuneRecord& record);

// "a checkpoint of `mantissa train --model gpt`" for a file whose hyper_parameters name a
// model; otherwise "no fine-tune's checkpoint (it records no `mantissa finetune` run and holds
// no Hugging Face language model's weights)".
std::string describe_other_checkpoint(const nlohmann::json& hparams);

}  // namespace mantissa::recipes
