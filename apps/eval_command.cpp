#include "eval_command.h"
#include "quant_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "gpt_run.h"
#include "image_run.h"
#include "mantissa/core/error.h"
#include "mantissa/io/untrusted_json.h"
#include "mantissa/train/checkpoint.h"
#include "run_metrics.h"
#include "thread_count.h"
#include "threads_option.h"

namespace mantissa::app {

// The runs these commands start and what they report (recipes/).
using namespace recipes;
namespace {

// What eval needs to know of a checkpoint before it builds the model, from one read of it.
struct CheckpointFacts {
  // The precision it was saved in (its trainer metadata's "precision"), or the "precision"
  // entry of a --save-weights file; 32-true when the file records none.
  std::string precision;
  // The rank of the LoRA adapters it holds (rows of its first lora_A weight), or 0.
  int64_t lora_rank = 0;
  // Whether it holds a GPT's token embedding (a GPT checkpoint or --save-weights file).
  bool gpt_weights = false;
};

std::string saved_precision(const train::CheckpointContents& contents, const std::string& path) {
  const auto it = contents.metadata.find(train::kCheckpointMetadataKey);
  if (it == contents.metadata.end()) {
    const auto weights = contents.metadata.find("precision");
    return weights == contents.metadata.end() ? "32-true" : weights->second;
  }
  io::check_json_nesting(it->second, "eval", path + ": the trainer metadata");
  try {
    return nlohmann::json::parse(it->second).at("precision").get<std::string>();
  } catch (const nlohmann::json::exception&) {
    fail("eval", "{} records no precision; pass --precision", path);
  }
}

int64_t lora_rank_in(const train::CheckpointContents& contents) {
  for (const auto& [name, t] : contents.tensors) {
    if (name.size() > 14 && name.compare(name.size() - 14, 14, ".lora_A.weight") == 0 &&
        t.dim() == 2)
      return t.size(0);
  }
  return 0;
}

// `need_precision`: whether the file's precision is wanted (no --precision given). Without it a
// missing file is left to the run, which reports it (nullopt).
std::optional<CheckpointFacts> read_checkpoint_facts(const std::string& path, bool need_precision) {
  if (!need_precision && !std::filesystem::is_regular_file(path)) return std::nullopt;
  const train::CheckpointContents contents = train::load_checkpoint_file(path);
  const bool gpt = std::any_of(contents.tensors.begin(), contents.tensors.end(), [](const auto& e) {
    return e.first == "wte.weight" || e.first.ends_with(".wte.weight");
  });
  return CheckpointFacts{need_precision ? saved_precision(contents, path) : std::string(),
                         lora_rank_in(contents), gpt};
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto opts = std::make_shared<TrainOptions>();
  auto gpt = std::make_shared<GptOptions>();
  auto checkpoint = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Evaluate a checkpoint or weights file without training: test loss and accuracy (mlp, "
      "cnn, vit), validation loss in nats per byte (gpt)");
  cmd->add_option("--checkpoint", *checkpoint,
                  "The checkpoint (e.g. ckpt/last.safetensors) or --save-weights file")
      ->required();
  cmd->add_option("--model", opts->model, "mlp, cnn, vit or gpt, as trained")
      ->capture_default_str();
  cmd->add_option("--hidden", opts->hidden, "mlp: hidden sizes, as trained")->capture_default_str();
  cmd->add_option("--patch", opts->vit_patch, "vit: patch size, as trained")->capture_default_str();
  cmd->add_option("--pool", opts->vit_pool, "vit: cls or mean, as trained")->capture_default_str();
  cmd->add_option("--text", gpt->text, "gpt: the corpus whose validation split is evaluated");
  cmd->add_option("--layers", gpt->layers, "gpt: blocks, as trained")->capture_default_str();
  cmd->add_option("--width", gpt->width, "gpt: width, as trained")->capture_default_str();
  cmd->add_option("--heads", gpt->heads, "gpt: heads, as trained")->capture_default_str();
  cmd->add_option("--context", gpt->context, "gpt: context, as trained")->capture_default_str();
  cmd->add_option("--batch-size", opts->batch_size, "gpt: windows per batch (default 16)");
  cmd->add_option("--precision", opts->precision,
                  "Precision to evaluate in (default: the checkpoint's; 32-true for a weights "
                  "file)");
  cmd->add_option("--data-dir", opts->data_dir, "Directory of the Fashion-MNIST files")
      ->capture_default_str();
  add_quant_options(*cmd, opts->quant, /*training=*/false);
  CLI::Option* threads_opt =
      cmd->add_option("--threads", opts->threads, "Worker threads (default: all cores)");
  cmd->add_option("--metrics-json", opts->metrics_json, "Write the metrics to this JSON file");
  cmd->add_option("--predictions", opts->predictions_csv,
                  "mlp, cnn, vit: also write each test image's predicted class to this CSV file "
                  "(index,predicted,label)");
  cmd->callback([opts, gpt, checkpoint, threads_opt, cmd] {
    check_threads_option(threads_opt, opts->threads, "eval");
    const bool precision_given = cmd->get_option("--precision")->count() > 0;
    const std::optional<CheckpointFacts> facts =
        read_checkpoint_facts(*checkpoint, !precision_given);
    if (facts) {
      if (!precision_given) opts->precision = facts->precision;
      // The wrong --model would otherwise list every tensor as missing and unexpected.
      MANTISSA_CHECK(facts->gpt_weights == (opts->model == "gpt"), "eval",
                     "{} holds the weights of {}, but --model is {}: pass {} (and the run's "
                     "size flags)",
                     *checkpoint, facts->gpt_weights ? "a gpt" : "an image model", opts->model,
                     facts->gpt_weights ? "--model gpt" : "--model mlp, cnn or vit");
    }
    // A fine-tuned checkpoint's adapters need the model rebuilt with them, and their scale
    // (alpha / rank) cannot be read back from the tensors: ask for both, as trained.
    if (const int64_t rank = facts ? facts->lora_rank : 0; rank > 0) {
      MANTISSA_CHECK(cmd->get_option("--lora-rank")->count() > 0, "eval",
                     "{} holds LoRA adapters of rank {}: pass --lora-rank {} and the run's "
                     "--lora-alpha (and its --precision and --quant-ignore for quantized bases)",
                     *checkpoint, rank, rank);
    }
    opts->evaluate_checkpoint = *checkpoint;
    opts->quiet = true;
    opts->progress_bar = false;
    if (opts->model == "gpt") {
      MANTISSA_CHECK(opts->predictions_csv.empty(), "eval",
                     "--predictions writes image classes; for the gpt, sample text with "
                     "`mantissa train --model gpt --sample-tokens N`");
      if (cmd->get_option("--batch-size")->count() == 0) opts->batch_size = 16;
      const TrainMetrics m = run_gpt_evaluation(*opts, *gpt);
      fmt::print(
          "{}: model gpt, precision {}: validation loss {:.4f} nats/byte ({:.4f} bits/byte)\n",
          *checkpoint, m.precision, *m.val_loss_nats_per_char,
          *m.val_loss_nats_per_char / std::log(2.0));
    } else {
      const TrainMetrics m = run_evaluation(*opts);
      fmt::print("{}: model {}, precision {}: test loss {:.4f}, test accuracy {:.4f}\n",
                 *checkpoint, opts->model, m.precision, m.final_test_loss.value_or(NAN),
                 m.final_test_accuracy.value_or(NAN));
    }
    if (!opts->predictions_csv.empty())
      fmt::print("predictions written to {}\n", opts->predictions_csv);
    if (!opts->metrics_json.empty()) fmt::print("metrics written to {}\n", opts->metrics_json);
  });
}

}  // namespace mantissa::app
