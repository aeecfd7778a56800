#include "eval_command.h"
#include "quant_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "comma_list.h"
#include "fp8_options.h"
#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/recipes/checkpoint_metadata.h"
#include "mantissa/recipes/finetuning.h"
#include "mantissa/recipes/gpt_run.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/recipes/init_from_check.h"
#include "mantissa/recipes/model_hparams.h"
#include "mantissa/recipes/model_names.h"
#include "mantissa/recipes/multi_precision_flags.h"
#include "mantissa/recipes/precision_settings.h"
#include "mantissa/recipes/run_metrics.h"
#include "mantissa/recipes/stored_format_check.h"
#include "mantissa/recipes/thread_count.h"
#include "mantissa/recipes/trainer_setup.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/report/metric_text.h"
#include "mantissa/train/precision_registry.h"
#include "threads_option.h"

namespace mantissa::app {

// The runs these commands start and what they report (recipes/).
using namespace recipes;
namespace {

// What eval needs to know of a checkpoint before it builds the model, from its header (the
// tensors are read once, by the load itself).
struct CheckpointFacts {
  // The precision it was saved in (its trainer metadata's "precision"), or the "precision"
  // entry of a --save-weights file; 32-true when a weights file records none, nullopt when a
  // checkpoint's trainer metadata does not say.
  std::optional<std::string> precision;
  // The rank of the LoRA adapters it holds (rows of its first lora_A weight), or 0.
  int64_t lora_rank = 0;
  // Whether it holds a GPT's token embedding (a GPT checkpoint or --save-weights file).
  bool gpt_weights = false;
  // What the model was built from (mantissa/recipes/model_hparams.h); {} for files written before
  // mantissa stored them.
  nlohmann::json hparams = nlohmann::json::object();
  // The FP8 recipe its trainer metadata records (precision_plugin's TransformerEnginePrecision
  // "recipe"), or null: what a file written before the hyperparameters held the fp8-* keys
  // says of its recipe.
  nlohmann::json fp8_recipe;
  // Its tensors' shapes, which the recorded sizes must agree with before a model is built.
  TensorShapes shapes;
};

int64_t lora_rank_in(const io::SafetensorsHeader& header) {
  for (const io::SafetensorsTensorInfo& t : header.tensors) {
    if (t.name.ends_with(".lora_A.weight") && t.name.size() > 14 && t.shape.size() == 2)
      return t.shape[0];
  }
  return 0;
}

// A missing file is left to the run, which reports it (nullopt).
std::optional<CheckpointFacts> read_checkpoint_facts(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) return std::nullopt;
  // A file it cannot read is refused naming --checkpoint and what to pass, as --init-from and
  // --resume do (the loader's error alone named neither).
  const io::SafetensorsHeader header = read_checkpoint_header_given_by(
      path, "--checkpoint",
      "a checkpoint a run wrote to its --checkpoint-dir (such as last.safetensors) or a "
      "--save-weights file");
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
  facts.hparams = recorded_model_hparams(header, path, "eval");
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
  if (facts.precision && !is_quantized_precision(*facts.precision) &&
      train::find_precision(*facts.precision) == nullptr) {
    fail("eval", "{} records the precision {}, which this build does not know; pass --precision",
         path, quote_untrusted(*facts.precision));
  }
  return facts;
}

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
  const std::string saved = canonical_precision(*facts.precision);
  const std::string wanted = canonical_precision(o.precision);
  if (saved == wanted) return;
  // int8-training keeps its weights trainable in float (quantized for each product only), so
  // its checkpoint holds plain weights, as a 32-true one does, and evaluates in any precision.
  const bool saved_codes = is_quantized_precision(saved) && saved != "int8-training";
  MANTISSA_CHECK(!saved_codes, "eval",
                 "{} holds {} weights, which evaluate only in {}: leave out --precision (to "
                 "compare precisions, evaluate the full-precision checkpoint it was fine-tuned "
                 "from with --precision {})",
                 checkpoint, saved, saved, wanted);
  // FP8 layers hold their scales and amax histories beside the weights: a file with them loads
  // only into FP8 layers; plain weights go into FP8 layers as --init-from does (the Trainer
  // converts the model after they are loaded; the scales start afresh).
  const bool saved_fp8 = recipes::is_fp8_precision(saved);
  const bool wanted_fp8 = recipes::is_fp8_precision(wanted);
  MANTISSA_CHECK(!saved_fp8 || wanted_fp8, "eval",
                 "{} holds FP8 layers ({}, with their scales and amax histories), which evaluate "
                 "only in transformer-engine or transformer-engine-float16: leave out --precision",
                 checkpoint, saved);
  const bool plain_into_fp8 = wanted_fp8 && !saved_fp8;
  if (!is_quantized_precision(wanted) && !plain_into_fp8) return;  // converted on load
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
  if (!given || !o.quant.init_from.empty() || !is_quantized_precision(o.precision) ||
      o.precision == "int8-training" || !facts.hparams.is_object() ||
      !facts.hparams.contains("quant-ignore") || !facts.hparams.at("quant-ignore").is_string())
    return;
  // Spelled either way ("net.2" or "2") by the run that wrote it.
  const std::string recorded =
      quant_ignore_for_model(facts.hparams.at("quant-ignore").get<std::string>(), o.model);
  auto as_set = [](const std::string& list) {
    std::vector<std::string> names;
    for (const std::string& n : split_comma_list(list)) names.push_back(n);
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

void add_eval_command(CLI::App& app) {
  auto opts = std::make_shared<TrainOptions>();
  auto gpt = std::make_shared<GptOptions>();
  auto checkpoint = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Evaluate a checkpoint or weights file without training: test loss and accuracy (mlp, "
      "cnn, vit), validation loss in nats per byte (gpt). The model, its sizes, adapters and "
      "precision are read from the file where it records them; flags given here win");
  cmd->add_option("--checkpoint", *checkpoint,
                  "The checkpoint (e.g. ckpt/last.safetensors) or --save-weights file")
      ->required();
  cmd->add_option("--model", opts->model, "mlp, cnn, vit or gpt, as trained (default: mlp)");
  cmd->add_option("--hidden", opts->hidden, "mlp: hidden sizes, as trained")
      ->check(comma_list(hidden_size_items()))
      ->capture_default_str();
  cmd->add_option("--patch", opts->vit_patch, "vit: patch size, as trained")->capture_default_str();
  cmd->add_option("--pool", opts->vit_pool, "vit: cls or mean, as trained")->capture_default_str();
  cmd->add_option("--text", gpt->text, "gpt: the corpus whose validation split is evaluated");
  cmd->add_option("--layers", gpt->layers, "gpt: blocks, as trained")->capture_default_str();
  cmd->add_option("--width", gpt->width, "gpt: width, as trained")->capture_default_str();
  cmd->add_option("--heads", gpt->heads, "gpt: heads, as trained")->capture_default_str();
  cmd->add_option("--context", gpt->context, "gpt: context, as trained")->capture_default_str();
  cmd->add_option("--batch-size", opts->batch_size, "gpt: windows per batch (default 16)");
  // As train's (docs/cli.md, "Batch limits"): eval's one pass is a train run's final
  // evaluation, which --limit-test-batches sets; --limit-val-batches is taken as the same.
  cmd->add_option("--limit-test-batches", opts->limit_test_batches,
                  "Batches to evaluate: a fraction (0.25) or a count (10) of the test set's "
                  "batches of 1000 (gpt: of the validation text's batches of --batch-size) "
                  "(default: all)");
  cmd->add_option("--limit-val-batches", opts->limit_val_batches,
                  "The same as --limit-test-batches (eval runs one evaluation; given both, they "
                  "must agree)");
  cmd->add_option("--precision", opts->precision,
                  "Precision to evaluate in (default: the checkpoint's; 32-true for a weights "
                  "file)");
  cmd->add_option("--accelerator", opts->accelerator,
                  "cpu, gpu (or cuda) or auto, as `train --accelerator`")
      ->capture_default_str();
  cmd->add_option("--data-dir", opts->data_dir, "Directory of the Fashion-MNIST files")
      ->capture_default_str();
  add_quant_options(*cmd, opts->quant, /*training=*/false);
  // Default: what the file records (an FP8 checkpoint's recipe and exclusions).
  add_fp8_options(cmd, &opts->precision_options);
  CLI::Option* threads_opt =
      cmd->add_option("--threads", opts->threads, "Worker threads (default: all cores)");
  cmd->add_option("--metrics-json", opts->metrics_json, "Write the metrics to this JSON file");
  cmd->add_option("--predictions", opts->predictions_csv,
                  "mlp, cnn, vit: also write each test image's predicted class to this CSV file "
                  "(index,predicted,label)");
  cmd->callback([opts, gpt, checkpoint, threads_opt, cmd] {
    check_model_name(opts->model, "eval");
    eval_batch_limit(*opts);  // bad values refused before the checkpoint is read
    check_threads_option(threads_opt, opts->threads, "eval");
    const bool precision_given = cmd->get_option("--precision")->count() > 0;
    const std::optional<CheckpointFacts> facts = read_checkpoint_facts(*checkpoint);
    if (facts) {
      // Flags given on the command line win over what the file says it was built with.
      const auto given = [cmd](const std::string& flag) {
        return cmd->get_option("--" + flag)->count() > 0;
      };
      apply_model_hparams(facts->hparams, *checkpoint, facts->shapes, given, *opts, *gpt);
      // The wrong --model would otherwise list every tensor as missing and unexpected. Without
      // the flag, the model came from the file's own record, which its tensors contradict.
      MANTISSA_CHECK(facts->gpt_weights == (opts->model == "gpt"), "eval",
                     "{} holds the weights of {}, but {} is {}: pass {} (and the run's "
                     "size flags)",
                     *checkpoint, facts->gpt_weights ? "a gpt" : "an image model",
                     given("model") ? "--model" : "the model the file records", opts->model,
                     facts->gpt_weights ? "--model gpt" : "--model mlp, cnn or vit");
      choose_precision(*facts, precision_given, *checkpoint, *opts);
      // FP8 layers from the file: rebuilt with the recipe and exclusions it was trained with
      // (plain weights converted on load take the --fp8-* flags alone).
      if (recipes::is_fp8_precision(opts->precision) && opts->quant.init_from.empty()) {
        apply_fp8_hparams(facts->hparams, facts->fp8_recipe, *checkpoint, facts->shapes, given,
                          opts->precision_options);
      }
      check_lora_rank(*facts, *checkpoint, opts->quant, given("lora-rank"));
      opts->quant.quant_ignore = quant_ignore_for_model(opts->quant.quant_ignore, opts->model);
      check_quant_ignore(*facts, *checkpoint, *opts, given("quant-ignore"));
    }
    // Also a value taken from the file's record, or with no record to check against.
    opts->quant.quant_ignore = quant_ignore_for_model(opts->quant.quant_ignore, opts->model);
    // The precision is settled (given, or the checkpoint's): flags for another are errors.
    check_quant_flags_apply(opts->precision, opts->quant, "eval");
    opts->evaluate_checkpoint = *checkpoint;
    opts->quiet = true;
    opts->progress_bar = false;
    if (opts->model == "gpt") {
      MANTISSA_CHECK(opts->predictions_csv.empty(), "eval",
                     "--predictions writes image classes; for the gpt, sample text with "
                     "`mantissa train --model gpt --sample-tokens N`");
      if (cmd->get_option("--batch-size")->count() == 0) opts->batch_size = 16;
      const TrainMetrics m = run_gpt_evaluation(*opts, *gpt);
      // The corpus may come from the file's record (a run's --text): named, so it is seen.
      fmt::print(
          "{}: model gpt, precision {}: validation loss {:.4f} nats/byte ({:.4f} bits/byte) on "
          "the validation split of {}\n",
          *checkpoint, m.precision, *m.val_loss_nats_per_char,
          *m.val_loss_nats_per_char / std::log(2.0),
          gpt->text.empty() ? std::string("the fortunes corpus") : quote_untrusted(gpt->text, 300));
    } else {
      const TrainMetrics m = run_evaluation(*opts);
      fmt::print("{}: model {}, precision {}: test loss {}, test accuracy {:.4f}\n", *checkpoint,
                 opts->model, m.precision, train::metric_text(m.final_test_loss.value_or(NAN)),
                 m.final_test_accuracy.value_or(NAN));
    }
    if (!opts->predictions_csv.empty())
      fmt::print("predictions written to {}\n", opts->predictions_csv);
    if (!opts->metrics_json.empty()) fmt::print("metrics written to {}\n", opts->metrics_json);
  });
}

}  // namespace mantissa::app
