#include "train_command.h"

#include <fmt/format.h>

#include "train_loop.h"

namespace mantissa::app {
namespace {

void print_summary(const TrainMetrics& m) {
  fmt::print(
      "final test accuracy: {:.4f}  ({:.0f} samples/s, peak memory {:.1f} MiB, of which "
      "{:.1f} MiB for training beyond the data set)\n",
      m.test_accuracy.back(), m.samples_per_second,
      static_cast<double>(m.peak_memory_bytes) / (1 << 20),
      static_cast<double>(m.peak_training_memory_bytes) / (1 << 20));
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto opts = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Train a reference model on Fashion-MNIST");
  cmd->add_option("--model", opts->model, "Model: mlp")->capture_default_str();
  cmd->add_option("--precision", opts->precision,
                  "32-true, 64-true, 16-mixed, bf16-mixed, 16-true or bf16-true")
      ->capture_default_str();
  cmd->add_option("--epochs", opts->epochs, "Passes over the training set")->capture_default_str();
  cmd->add_option("--batch-size", opts->batch_size, "Samples per step")->capture_default_str();
  cmd->add_option("--lr", opts->lr, "AdamW learning rate")->capture_default_str();
  cmd->add_option("--weight-decay", opts->weight_decay, "AdamW weight decay")
      ->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Seed for initialisation and shuffling")
      ->capture_default_str();
  cmd->add_option("--hidden", opts->hidden, "Hidden sizes, comma separated (e.g. 1024,1024)")
      ->capture_default_str();
  cmd->add_option("--threads", opts->threads, "Worker threads (default: all cores)");
  cmd->add_option("--train-subset", opts->train_subset,
                  "Train on the first N training images only (quick runs)");
  cmd->add_flag("--master-weights", opts->master_weights,
                "16-true/bf16-true: keep fp32 master weights in the optimizer");
  cmd->add_flag("--stochastic-rounding", opts->stochastic_rounding,
                "bf16-true: round the bf16 weight update stochastically");
  cmd->add_option("--metrics-json", opts->metrics_json, "Write metrics to this JSON file");
  cmd->add_option("--data-dir", opts->data_dir,
                  "Fashion-MNIST directory (default: $MANTISSA_DATA_DIR, then "
                  "/usr/share/datasets/fashion-mnist)");
  cmd->add_option("--max-steps", opts->max_steps, "Stop after this many optimizer steps (-1: none)")
      ->capture_default_str();
  cmd->add_option("--accumulate-grad-batches", opts->accumulate_grad_batches,
                  "Batches whose gradients are summed per optimizer step")
      ->capture_default_str();
  cmd->add_option("--gradient-clip-val", opts->gradient_clip_val,
                  "Clip gradients to this norm or value (0: no clipping)")
      ->capture_default_str();
  cmd->add_option("--gradient-clip-algorithm", opts->gradient_clip_algorithm, "norm or value")
      ->capture_default_str();
  cmd->add_option("--checkpoint-dir", opts->checkpoint_dir,
                  "Save a checkpoint every epoch and last.safetensors in this directory");
  cmd->add_option("--resume", opts->resume, "Continue training from this checkpoint");
  cmd->add_option("--limit-train-batches", opts->limit_train_batches,
                  "Batches per epoch: a fraction (0.25) or a count (10)")
      ->capture_default_str();
  cmd->add_option("--val-check-interval", opts->val_check_interval,
                  "Validate every fraction of an epoch (0.5) or every N batches (100)")
      ->capture_default_str();
  cmd->add_flag(
      "--no-progress-bar", [opts](int64_t) { opts->progress_bar = false; },
      "Plain output without a progress bar");
  cmd->add_option("--logger", opts->logger,
                  "Log metrics with csv (metrics.csv) or tensorboard (event files)");
  cmd->add_option("--log-dir", opts->log_dir, "Loggers write <log-dir>/version_<N>")
      ->capture_default_str();
  cmd->callback([opts] {
    const TrainMetrics m = run_training(*opts);
    print_summary(m);
    if (!opts->metrics_json.empty()) fmt::print("metrics written to {}\n", opts->metrics_json);
  });
}

}  // namespace mantissa::app
