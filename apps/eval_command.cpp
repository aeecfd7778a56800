#include "eval_command.h"

#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "comma_list.h"
#include "fp8_options.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/recipes/checkpoint_evaluation.h"
#include "mantissa/train/report/metric_text.h"
#include "quant_options.h"
#include "threads_option.h"

namespace mantissa::app {

// The runs these commands start and what they report (recipes/).
using namespace recipes;

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
  cmd->add_flag("--overwrite-output-dir", opts->overwrite_output_dir,
                "Replace a --metrics-json file that exists (without it, one that is not empty "
                "is refused), as train's flag does");
  cmd->add_option("--predictions", opts->predictions_csv,
                  "mlp, cnn, vit: also write each test image's predicted class to this CSV file "
                  "(index,predicted,label)");
  cmd->callback([opts, gpt, checkpoint, threads_opt, cmd] {
    check_threads_option(threads_opt, opts->threads, "eval");
    opts->quiet = true;
    opts->progress_bar = false;
    // Flags given on the command line win over what the file says it was built with.
    const auto given = [cmd](const std::string& flag) {
      return cmd->get_option("--" + flag)->count() > 0;
    };
    const TrainMetrics m = run_checkpoint_evaluation(*checkpoint, *opts, *gpt, given);
    if (opts->model == "gpt") {
      // The corpus may come from the file's record (a run's --text): named, so it is seen.
      fmt::print(
          "{}: model gpt, precision {}: validation loss {:.4f} nats/byte ({:.4f} bits/byte) on "
          "the validation split of {}\n",
          *checkpoint, m.precision, *m.val_loss_nats_per_char,
          *m.val_loss_nats_per_char / std::log(2.0),
          gpt->text.empty() ? std::string("the fortunes corpus") : quote_untrusted(gpt->text, 300));
    } else {
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
