#include "mantissa/recipes/init_from_check.h"

#include <fmt/format.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/core/warning.h"
#include "mantissa/recipes/checkpoint_metadata.h"
#include "mantissa/recipes/finetune_record.h"
#include "mantissa/recipes/finetuning.h"
#include "mantissa/recipes/model_hparams.h"
#include "mantissa/recipes/stored_format_check.h"
#include "mantissa/recipes/tensor_sizes.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/precision_registry.h"

namespace mantissa::recipes {

namespace {

// The user's paths are quoted whole (escaped only) where a message gives them to pass again.
constexpr size_t kPathMaxBytes = 4096;

// The hyperparameters `path` records against the run's flags; errors are tagged with `flag`.
// refuse_damage: a damaged record is an error first, in eval's words (a resumed run builds its
// model from its flags, which never replace a damaged record as eval's do); without it (an
// --init-from file) the load's own checks name what does not fit.
void check_recorded_hparams(const std::string& path, const char* flag, const TrainOptions& o,
                            const GptOptions& g, bool refuse_damage) {
  if (path.empty() || !std::filesystem::is_regular_file(path)) return;
  const io::SafetensorsHeader header = read_checkpoint_header_given_by(
      path, flag,
      std::string_view(flag) == "--resume"
          ? "a checkpoint a run wrote to its --checkpoint-dir (such as last.safetensors)"
          : "a run's checkpoint (the last.safetensors of its --checkpoint-dir) or a "
            "--save-weights file");
  const nlohmann::json recorded = recorded_model_hparams(header, path, flag);
  // A fine-tune's checkpoint (finetune_record.h) builds none of train's models: refused before
  // its tensors are listed as missing and unexpected.
  if (const std::optional<FinetuneRecord> finetune = finetune_record(header, recorded)) {
    const bool resume = std::string_view(flag) == "--resume";
    fail(flag, "{} is {}, which `mantissa train` {}: {}, or give {}",
         quote_untrusted(path, kPathMaxBytes), describe_finetune_checkpoint(*finetune),
         resume ? "cannot continue" : "builds no model of (mlp, cnn, vit, gpt)",
         resume ? fmt::format("continue it with `mantissa finetune --model-dir {} --resume {}` "
                              "and that run's other flags",
                              finetune->model_dir.empty()
                                  ? std::string("DIR")
                                  : quote_untrusted(finetune->model_dir, kPathMaxBytes),
                              quote_untrusted(path, kPathMaxBytes))
                : std::string("fine-tune a Hugging Face model with `mantissa finetune "
                              "--model-dir DIR` (docs/pretrained.md)"),
         resume ? "a checkpoint of `mantissa train`"
                : "the checkpoint or --save-weights file of a `mantissa train` run");
  }
  TensorShapes shapes;
  for (const io::SafetensorsTensorInfo& t : header.tensors) shapes[t.name] = t.shape;
  if (refuse_damage) {
    check_stored_format(header, path, flag, "use an earlier checkpoint");
    check_model_hparams_intact(recorded, path, shapes, flag, "use an earlier checkpoint");
  }
  if (!recorded.is_object()) return;  // damaged: the load's own checks name what does not fit
  // What eval does with flags given on its command line, every flag given: a key whose flag
  // must match the file (the model's shape, recipes/model_hparams.cpp) and does not is an
  // error there; a damaged value (wrong type, contradicted by the tensors) or a setting that
  // may differ (corpus, adapters) is not. One key at a time, --model first, so that the error
  // here names the flag the run has wrong.
  const nlohmann::json run = o.model == "gpt" ? gpt_model_hparams(o, g) : image_model_hparams(o);
  std::vector<std::string> keys;
  if (recorded.contains("model")) keys.push_back("model");
  for (const auto& [key, value] : recorded.items()) {
    if (key != "model") keys.push_back(key);
  }
  for (const std::string& key : keys) {
    TrainOptions o_copy = o;
    GptOptions g_copy = g;
    try {
      apply_model_hparams(
          nlohmann::json{{key, recorded.at(key)}}, path, shapes,
          [](const std::string&) { return true; }, o_copy, g_copy);
    } catch (const Error&) {
      // Only the head count leaves every tensor's shape as it is; any other size changes them.
      fail(flag, "{} was trained with --{} {}, but --{} is {} here: pass --{} {}{}", path, key,
           as_flag_value(recorded.at(key)), key,
           run.contains(key) ? as_flag_value(run.at(key)) : std::string("another value"), key,
           as_flag_value(recorded.at(key)),
           key == "heads" ? " (its weights would load into this model's shapes, and compute "
                            "something else)"
                          : " (its weights do not fit this model)");
    }
  }
}

// A recorded number (nullopt when absent or damaged: nothing to compare with).
std::optional<double> recorded_number(const nlohmann::json& recorded, const char* key) {
  const auto it = recorded.find(key);
  if (it == recorded.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// The trainer metadata of checkpoint `path` (not an object when damaged: the restore names what
// is wrong).
nlohmann::json resumed_metadata(const std::string& path, const io::SafetensorsHeader& header) {
  return metadata_json(header.metadata, train::kCheckpointMetadataKey, path, "the trainer metadata",
                       "--resume", nullptr);
}

// The optimizer step the trainer metadata records (0 when none).
int64_t saved_step(const nlohmann::json& meta) {
  const auto step = meta.find("global_step");
  return step != meta.end() && step->is_number_integer() ? step->get<int64_t>() : 0;
}

// The LoRA rank a checkpoint's hyper_parameters record: train's record it always, a fine-tune's
// only with adapters (its "task" record without "lora-rank" is a full fine-tune's); nullopt when
// unknown (damaged, or an older build's).
std::optional<int64_t> recorded_lora_rank(const nlohmann::json& recorded) {
  const auto rank = recorded.find("lora-rank");
  if (rank != recorded.end()) {
    if (!rank->is_number_integer()) return std::nullopt;
    return rank->get<int64_t>();
  }
  const auto task = recorded.find("task");
  if (task != recorded.end() && *task == kFinetuneTask) return 0;
  return std::nullopt;
}

// Adapters on one side only, before the model is built: the restore listed every tensor name
// that did not fit ("missing [...q_proj.weight, ...], unexpected [...q_proj.base_layer.weight,
// ...]"), and under a transformer-engine precision blamed --fp8-exclude (the FP8 layers are
// named base_layer on one side). `instead`: how to train adapters on a full run's weights.
void check_adapters_on_both_sides(const std::string& path, const nlohmann::json& recorded,
                                  const QuantOptions& q, std::string_view instead) {
  const std::optional<int64_t> saved_rank = recorded_lora_rank(recorded);
  if (!saved_rank || (*saved_rank == 0) == (q.lora_rank == 0)) return;
  const int64_t saved = *saved_rank;
  if (saved > 0)
    fail("--resume",
         "{} holds LoRA adapters of rank {} (it was trained with --lora-rank {}), and "
         "--lora-rank is {} here, where they would have no place: resume with --lora-rank {}",
         path, saved, saved, q.lora_rank, saved);
  fail("--resume",
       "{} holds no LoRA adapters (it was trained without --lora-rank), and --lora-rank is {} "
       "here: resume without --lora-rank; {}",
       path, q.lora_rank, instead);
}

// The adapters' and the quantized layers' settings a checkpoint records against the resumed
// run's flags (docs/trainer.md, "What a resume may change"): adapters on one side only are
// refused, those of the same rank are checked by check_resumed_lora; another --quant-dtype is
// applied with a warning (the saved weights mean the same; the steps after train with the new
// setting). Also for a checkpoint already at --max-steps: its final validation is of the model
// this run builds.
void check_resumed_finetuning(const std::string& path, const io::SafetensorsHeader& header,
                              const nlohmann::json& recorded, const TrainOptions& o) {
  const nlohmann::json meta = resumed_metadata(path, header);
  if (!meta.is_object()) return;  // the restore names what is wrong
  const int64_t global_step = saved_step(meta);
  check_resumed_lora(path, header, recorded, o.quant,
                     "to fine-tune its weights with adapters, start a new run from them with "
                     "--init-from instead of --resume");
  // Another quantized precision does not load; the restore says so.
  const auto precision = meta.find("precision");
  const auto dtype = recorded.find("quant-dtype");
  if (train::precision_traits(o.precision).quantized_weights && precision != meta.end() &&
      *precision == o.precision && dtype != recorded.end() && dtype->is_string() &&
      dtype->get<std::string>() != o.quant.quant_dtype) {
    warn(fmt::format(
        "resuming: the quantized layers computed in {} in the checkpoint and compute in {} in "
        "this run (--quant-dtype): applying {} from step {} on; the losses from there are not "
        "those of a run that kept {}",
        as_flag_value(*dtype), o.quant.quant_dtype, o.quant.quant_dtype, global_step,
        as_flag_value(*dtype)));
  }
}

}  // namespace

void check_resumed_lora(const std::string& path, const io::SafetensorsHeader& header,
                        const nlohmann::json& recorded, const QuantOptions& q,
                        std::string_view adapters_on_its_weights) {
  if (!recorded.is_object()) return;  // the restore names what is wrong
  check_adapters_on_both_sides(path, recorded, q, adapters_on_its_weights);
  const nlohmann::json meta = resumed_metadata(path, header);
  if (!meta.is_object()) return;  // the restore names what is wrong
  // Adapters of another rank do not load; the restore says so, naming the rank.
  const auto rank = recorded.find("lora-rank");
  if (q.lora_rank <= 0 || rank == recorded.end() || !rank->is_number_integer() ||
      rank->get<int64_t>() != q.lora_rank)
    return;
  const auto r = static_cast<double>(q.lora_rank);
  if (const std::optional<double> alpha = recorded_number(recorded, "lora-alpha");
      alpha && *alpha != q.lora_alpha) {
    fail("--resume",
         "{} was trained with --lora-alpha {:g}, but --lora-alpha is {:g} here: its adapters "
         "were trained scaled by alpha / rank = {:g} and would be scaled by {:g}, so the "
         "resumed model would not be the one saved (what the adapters learned would count "
         "{:g} times); pass --lora-alpha {:g}",
         path, *alpha, q.lora_alpha, *alpha / r, q.lora_alpha / r, q.lora_alpha / *alpha, *alpha);
  }
  if (const std::optional<double> dropout = recorded_number(recorded, "lora-dropout");
      dropout && *dropout != q.lora_dropout) {
    warn(fmt::format(
        "resuming: the LoRA dropout (--lora-dropout) was {:g} in the checkpoint and is {:g} in "
        "this run: applying {:g} from step {} on",
        *dropout, q.lora_dropout, q.lora_dropout, saved_step(meta)));
  }
}

io::SafetensorsHeader read_checkpoint_header_given_by(const std::string& path, const char* flag,
                                                      std::string_view what_to_pass) {
  try {
    return train::read_checkpoint_header(path);
  } catch (const Error& e) {
    // The loader's error names the file and the damage, not the flag that gave the file nor
    // what to pass instead (a truncated file or a config.json read "[load_safetensors] ...").
    std::string why = e.what();
    if (why.starts_with("[")) why.erase(0, why.find("] ") + 2);
    if (const std::string quoted = "'" + path + "': "; why.starts_with(quoted)) {
      why.erase(0, quoted.size());
    }
    fail(flag, "{} is not a readable safetensors checkpoint ({}); pass {}", path, why,
         what_to_pass);
  }
}

std::string init_from_banner(const std::string& path) {
  if (path.empty()) return "";
  const io::SafetensorsHeader header = train::read_checkpoint_header(path);
  const nlohmann::json state = metadata_json(header.metadata, train::kCheckpointMetadataKey, path,
                                             "trainer state", "--init-from", nullptr);
  const bool has_step = state.is_object() && state.contains("global_step") &&
                        state["global_step"].is_number_integer();
  return fmt::format("weights from {} ({})", quote_untrusted(path),
                     has_step ? fmt::format("step {} of the run that wrote it",
                                            state["global_step"].get<int64_t>())
                              : std::string("a --save-weights file: no step recorded"));
}

void check_init_from(const TrainOptions& o, const GptOptions& g) {
  check_recorded_hparams(o.quant.init_from, "--init-from", o, g, /*refuse_damage=*/false);
}

void check_resume(const TrainOptions& o, const GptOptions& g) {
  check_recorded_hparams(o.resume, "--resume", o, g, /*refuse_damage=*/true);
  if (o.resume.empty() || !std::filesystem::is_regular_file(o.resume)) return;
  const io::SafetensorsHeader header = train::read_checkpoint_header(o.resume);
  const nlohmann::json recorded = recorded_model_hparams(header, o.resume, "--resume");
  if (recorded.is_object()) check_resumed_finetuning(o.resume, header, recorded, o);
}

}  // namespace mantissa::recipes
