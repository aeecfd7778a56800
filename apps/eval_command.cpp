#include "eval_command.h"

#include <fmt/format.h>

#include <memory>

#include <nlohmann/json.hpp>

#include "mantissa/core/error.h"
#include "mantissa/io/untrusted_json.h"
#include "mantissa/train/checkpoint.h"
#include "run_metrics.h"
#include "thread_count.h"
#include "train_loop.h"

namespace mantissa::app {
namespace {

// The precision a checkpoint was saved in (its trainer metadata's "precision").
std::string saved_precision(const std::string& path) {
  const train::CheckpointContents contents = train::load_checkpoint_file(path);
  const auto it = contents.metadata.find(train::kCheckpointMetadataKey);
  MANTISSA_CHECK(it != contents.metadata.end(), "eval",
                 "{} is not a mantissa checkpoint (no trainer metadata)", path);
  io::check_json_nesting(it->second, "eval", path + ": the trainer metadata");
  try {
    return nlohmann::json::parse(it->second).at("precision").get<std::string>();
  } catch (const nlohmann::json::exception&) {
    fail("eval", "{} records no precision; pass --precision", path);
  }
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto opts = std::make_shared<TrainOptions>();
  auto checkpoint = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "Report the test loss and accuracy of a checkpoint (mlp, cnn, vit), no training");
  cmd->add_option("--checkpoint", *checkpoint, "The checkpoint file (e.g. ckpt/last.safetensors)")
      ->required();
  cmd->add_option("--model", opts->model, "mlp, cnn or vit, as trained")->capture_default_str();
  cmd->add_option("--hidden", opts->hidden, "mlp: hidden sizes, as trained")->capture_default_str();
  cmd->add_option("--patch", opts->vit_patch, "vit: patch size, as trained")->capture_default_str();
  cmd->add_option("--pool", opts->vit_pool, "vit: cls or mean, as trained")->capture_default_str();
  cmd->add_option("--precision", opts->precision,
                  "Precision to evaluate in (default: the checkpoint's)");
  cmd->add_option("--data-dir", opts->data_dir, "Directory of the Fashion-MNIST files")
      ->capture_default_str();
  CLI::Option* threads_opt =
      cmd->add_option("--threads", opts->threads, "Worker threads (default: all cores)");
  cmd->add_option("--metrics-json", opts->metrics_json, "Write the metrics to this JSON file");
  cmd->callback([opts, checkpoint, threads_opt, cmd] {
    check_threads_option(threads_opt, opts->threads, "eval");
    MANTISSA_CHECK(opts->model != "gpt", "eval",
                   "eval supports mlp, cnn and vit; a GPT checkpoint is validated by `mantissa "
                   "train --model gpt --resume {}` (its final validation)",
                   *checkpoint);
    if (cmd->get_option("--precision")->count() == 0)
      opts->precision = saved_precision(*checkpoint);
    // A resume with no step left to run: the Trainer restores the checkpoint (with all its
    // checks) and the run evaluates the restored weights on the test set.
    opts->resume = *checkpoint;
    opts->max_steps = 0;
    opts->quiet = true;
    opts->progress_bar = false;
    const TrainMetrics m = run_training(*opts);
    MANTISSA_CHECK(m.final_test_accuracy.has_value(), "eval", "no test evaluation ran");
    fmt::print("{}: model {}, precision {}: test loss {:.4f}, test accuracy {:.4f}\n", *checkpoint,
               opts->model, m.precision, m.final_test_loss.value_or(NAN), *m.final_test_accuracy);
    if (!opts->metrics_json.empty()) fmt::print("metrics written to {}\n", opts->metrics_json);
  });
}

}  // namespace mantissa::app
