// `mantissa eval` as a library call (see checkpoint_evaluation.h).
#include "mantissa/recipes/checkpoint_evaluation.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/recipes/checkpoint_metadata.h"
#include "mantissa/recipes/earlier_run_outputs.h"
#include "mantissa/recipes/finetune_record.h"
#include "mantissa/recipes/finetuning.h"
#include "mantissa/recipes/model_hparams.h"
#include "mantissa/recipes/model_names.h"
#include "mantissa/recipes/multi_precision_flags.h"
#include "mantissa/recipes/stored_format_check.h"
#include "mantissa/recipes/trainer_setup.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/precision_registry.h"

namespace mantissa::recipes {
namespace {

int64_t lora_rank_in(const io::SafetensorsHeader& header) {
  for (const io::SafetensorsTensorInfo& t : header.tensors) {
    if (t.name.ends_with(".lora_A.weight") && t.name.size() > 14 && t.shape.size() == 2)
      return t.shape[0];
  }
  return 0;
}

// A missing file is left to the run, which reports it (nullopt).
}  // namespace

std::optional<CheckpointFacts> read_checkpoint_facts(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) return std::nullopt;
  // A file it cannot read is refused naming --checkpoint and what to pass, as --init-from and
  // --resume do (the loader's error alone named neither).
  const io::SafetensorsHeader header = read_checkpoint_header_given_by(
      path, "--checkpoint",
      "a checkpoint a run wrote to its --checkpoint-dir (such as last.safetensors) or a "
      "--save-weights file");
  // A fine-tune's checkpoint (its record, or a Hugging Face causal LM's tensor names in an older
  // one or a full fine-tune's model.safetensors; finetune_record.h) builds none of eval's
  // models: refused before its tensors are listed as missing and unexpected.
  const nlohmann::json hparams = recorded_model_hparams(header, path, "eval");
  if (const std::optional<FinetuneRecord> finetune = finetune_record(header, hparams)) {
    fail("eval",
         "{} holds a Hugging Face language model's weights ({}), but eval takes the checkpoints "
         "of `mantissa train` (mlp, cnn, vit, gpt). A fine-tune prints its validation loss "
         "every --eval-interval steps and writes it to --metrics-json; to run the fine-tuned "
         "model, use `mantissa generate --model-dir BASE --adapter OUTPUT_DIR` (LoRA) or "
         "`mantissa generate --model-dir OUTPUT_DIR` (full fine-tune) (docs/pretrained.md)",
         path, describe_finetune_checkpoint(*finetune));
  }
  // Its recorded precision and quantized layers' dtype against its tensors, before either
  // decides what is built.
  check_stored_format(header, path, "eval", "use an earlier checkpoint");
  CheckpointFacts facts;
  for (const io::SafetensorsTensorInfo& t : header.tensors) facts.shapes[t.name] = t.shape;
  facts.lora_rank = lora_rank_in(header);
  facts.gpt_weights = std::any_of(header.tensors.begin(), header.tensors.end(), [](const auto& t) {
    return t.name == "wte.weight" || t.name.ends_with(".wte.weight");
  });
  // A checkpoint's trainer metadata; null for a --save-weights file.
  facts.hparams = hparams;
  const nlohmann::json meta = metadata_json(header.metadata, train::kCheckpointMetadataKey, path,
                                            "the trainer metadata", "eval", nullptr);
  if (meta.is_null()) {
    const auto precision = header.metadata.find("precision");
    facts.precision = precision == header.metadata.end() ? "32-true" : precision->second;
  } else {
    if (meta.is_object() && meta.contains("precision") && meta.at("precision").is_string())
      facts.precision = meta.at("precision").get<std::string>();
    const nlohmann::json* at = &meta;
    for (const char* key : {"precision_plugin", "TransformerEnginePrecision", "recipe"})
      at = at != nullptr && at->is_object() && at->contains(key) ? &at->at(key) : nullptr;
    if (at != nullptr) facts.fp8_recipe = *at;
  }
  // From the file: checked before it is used or quoted (docs/design.md, "Untrusted files").
  if (facts.precision && train::find_precision(*facts.precision) == nullptr) {
    fail("eval", "{} records the precision {}, which this build does not know; pass --precision",
         path, quote_untrusted(*facts.precision));
  }
  return facts;
}

namespace {

// Which precision to evaluate in, and how: a quantized checkpoint only in its own mode (its
// 4-/8-bit codes are what it holds); full-precision weights (int8-training's included) in any
// precision, quantized on load (as --init-from) when a quantized one is asked for.
void choose_precision(const CheckpointFacts& facts, bool precision_given,
                      const std::string& checkpoint, TrainOptions& o) {
  if (!precision_given) {
    MANTISSA_CHECK(facts.precision.has_value(), "eval", "{} records no precision; pass --precision",
                   checkpoint);
    o.precision = *facts.precision;
    return;
  }
  if (!facts.precision) return;  // nothing to compare with: the load checks the tensors
  const std::string saved = train::normalize_precision(*facts.precision);
  const std::string wanted = train::normalize_precision(o.precision);
  if (saved == wanted) return;
  // int8-training keeps its weights trainable in float (quantized for each product only), so
  // its checkpoint holds plain weights, as a 32-true one does, and evaluates in any precision.
  const bool saved_codes = train::precision_traits(saved).stores_codes;
  MANTISSA_CHECK(!saved_codes, "eval",
                 "{} holds {} weights, which evaluate only in {}: leave out --precision (to "
                 "compare precisions, evaluate the full-precision checkpoint it was fine-tuned "
                 "from with --precision {})",
                 checkpoint, saved, saved, wanted);
  // FP8 layers hold their scales and amax histories beside the weights: a file with them loads
  // only into FP8 layers; plain weights go into FP8 layers as --init-from does (the Trainer
  // converts the model after they are loaded; the scales start afresh).
  const bool saved_fp8 = train::precision_traits(saved).fp8;
  const bool wanted_fp8 = train::precision_traits(wanted).fp8;
  MANTISSA_CHECK(!saved_fp8 || wanted_fp8, "eval",
                 "{} holds FP8 layers ({}, with their scales and amax histories), which evaluate "
                 "only in transformer-engine or transformer-engine-float16: leave out --precision",
                 checkpoint, saved);
  const bool plain_into_fp8 = wanted_fp8 && !saved_fp8;
  if (!train::precision_traits(wanted).quantized_weights && !plain_into_fp8)
    return;  // converted on load
  MANTISSA_CHECK(facts.lora_rank == 0, "eval",
                 "{} holds LoRA adapters over {} weights; converting the base under trained "
                 "adapters is not supported: leave out --precision",
                 checkpoint, saved);
  o.quant.init_from = checkpoint;  // load the plain weights, then quantize or convert them
}

// The adapters are rebuilt before the file is loaded, so their rank must be known: from the
// file's hyperparameters or --lora-rank. Their scale (alpha / rank) cannot be read back from
// the tensors of a file without hyperparameters: then both are asked for.
void check_lora_rank(const CheckpointFacts& facts, const std::string& checkpoint,
                     const QuantOptions& q, bool rank_given) {
  if (facts.lora_rank == 0) {
    MANTISSA_CHECK(
        q.lora_rank == 0, "eval", "{} holds no LoRA adapters, but {}", checkpoint,
        rank_given ? fmt::format("--lora-rank is {}: leave it out", q.lora_rank)
                   : fmt::format("it records --lora-rank {}: the file is damaged", q.lora_rank));
    return;
  }
  MANTISSA_CHECK(q.lora_rank > 0, "eval",
                 "{} holds LoRA adapters of rank {}: pass --lora-rank {} and the run's "
                 "--lora-alpha (and its --precision and --quant-ignore for quantized bases)",
                 checkpoint, facts.lora_rank, facts.lora_rank);
  MANTISSA_CHECK(q.lora_rank == facts.lora_rank, "eval",
                 "{} holds LoRA adapters of rank {}, but --lora-rank is {}: pass --lora-rank {} "
                 "or leave it out",
                 checkpoint, facts.lora_rank, q.lora_rank, facts.lora_rank);
}

// A file that holds 4-/8-bit weights holds the layers its run quantized in that form and the
// layers --quant-ignore kept as plain ones: another --quant-ignore builds other layers, and the
// load failed listing tensors ("size mismatch for net.0.base_layer.weight"). Said as that, as
// --resume does. (Full-precision weights quantized on load, and int8-training's float weights,
// take any --quant-ignore.)
void check_quant_ignore(const CheckpointFacts& facts, const std::string& checkpoint,
                        const TrainOptions& o, bool given) {
  if (!given || !o.quant.init_from.empty() || !train::precision_traits(o.precision).stores_codes ||
      !facts.hparams.is_object() || !facts.hparams.contains("quant-ignore") ||
      !facts.hparams.at("quant-ignore").is_string())
    return;
  // Spelled either way ("net.2" or "2") by the run that wrote it.
  const std::string recorded =
      quant_ignore_for_model(facts.hparams.at("quant-ignore").get<std::string>(), o.model);
  auto as_set = [](const std::string& list) {
    std::vector<std::string> names;
    for (size_t start = 0;;) {  // every item, empty ones too
      const size_t comma = list.find(',', start);
      names.push_back(list.substr(start, comma == std::string::npos ? comma : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
  };
  MANTISSA_CHECK(as_set(recorded) == as_set(o.quant.quant_ignore), "eval",
                 "{} holds the {} layers of a run with --quant-ignore {}, but --quant-ignore is "
                 "{} here, which would build other layers: leave --quant-ignore out (the file "
                 "records it)",
                 checkpoint, o.precision, as_flag_value(recorded),
                 as_flag_value(o.quant.quant_ignore));
}

}  // namespace

void settle_evaluation_options(const std::string& checkpoint, const OptionGiven& given,
                               TrainOptions& o, GptOptions& g) {
  check_model_name(o.model, "eval");
  eval_batch_limit(o);  // bad values refused before the checkpoint is read
  const std::optional<CheckpointFacts> facts = read_checkpoint_facts(checkpoint);
  if (facts) {
    // What the caller set wins over what the file says it was built with.
    apply_model_hparams(facts->hparams, checkpoint, facts->shapes, given, o, g);
    // The wrong --model would otherwise list every tensor as missing and unexpected. Without
    // the flag, the model came from the file's own record, which its tensors contradict.
    MANTISSA_CHECK(facts->gpt_weights == (o.model == "gpt"), "eval",
                   "{} holds the weights of {}, but {} is {}: pass {} (and the run's "
                   "size flags)",
                   checkpoint, facts->gpt_weights ? "a gpt" : "an image model",
                   given("model") ? "--model" : "the model the file records", o.model,
                   facts->gpt_weights ? "--model gpt" : "--model mlp, cnn or vit");
    choose_precision(*facts, given("precision"), checkpoint, o);
    // FP8 layers from the file: rebuilt with the recipe and exclusions it was trained with
    // (plain weights converted on load take the --fp8-* flags alone).
    if (train::precision_traits(o.precision).fp8 && o.quant.init_from.empty()) {
      apply_fp8_hparams(facts->hparams, facts->fp8_recipe, checkpoint, facts->shapes, given,
                        o.precision_options);
    }
    check_lora_rank(*facts, checkpoint, o.quant, given("lora-rank"));
    o.quant.quant_ignore = quant_ignore_for_model(o.quant.quant_ignore, o.model);
    check_quant_ignore(*facts, checkpoint, o, given("quant-ignore"));
  }
  // Also a value taken from the file's record, or with no record to check against.
  o.quant.quant_ignore = quant_ignore_for_model(o.quant.quant_ignore, o.model);
  // The precision is settled (given, or the checkpoint's): flags for another are errors.
  check_quant_flags_apply(o.precision, o.quant, "eval");
  o.evaluate_checkpoint = checkpoint;
}

TrainMetrics run_checkpoint_evaluation(const std::string& checkpoint, TrainOptions& o,
                                       GptOptions& g, const OptionGiven& given) {
  // Before the checkpoint is read: an evaluation has nothing to resume, so only
  // --overwrite-output-dir lets it replace an earlier run's metrics.
  refuse_earlier_metrics_json(o.metrics_json, /*resuming=*/false, o.overwrite_output_dir,
                              /*can_resume=*/false, "eval");
  settle_evaluation_options(checkpoint, given, o, g);
  if (o.model != "gpt") return run_evaluation(o);
  MANTISSA_CHECK(o.predictions_csv.empty(), "eval",
                 "--predictions writes image classes; for the gpt, sample text with "
                 "`mantissa train --model gpt --sample-tokens N`");
  if (!given("batch-size")) o.batch_size = 16;
  return run_gpt_evaluation(o, g);
}

}  // namespace mantissa::recipes
