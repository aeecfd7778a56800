#include "trainer_loop_options.h"

namespace mantissa::app {

void add_trainer_loop_options(CLI::App& cmd,
                              const std::shared_ptr<recipes::TrainOptions>& options) {
  recipes::TrainOptions& o = *options;
  cmd.add_option("--accumulate-grad-batches", o.accumulate_grad_batches,
                 "Batches whose gradients are summed per optimizer step")
      ->capture_default_str();
  cmd.add_option("--gradient-clip-val", o.gradient_clip_val,
                 "Clip gradients to this norm or value (0: no clipping)")
      ->capture_default_str();
  cmd.add_option("--gradient-clip-algorithm", o.gradient_clip_algorithm, "norm or value")
      ->capture_default_str();
  cmd.add_option("--checkpoint-dir", o.checkpoint_dir,
                 "Save a checkpoint every epoch and after every validation inside one, and "
                 "last.safetensors, in this directory");
  cmd.add_option(
      "--resume", o.resume,
      "Continue training from this checkpoint: a file, or last / best of --checkpoint-dir");
  cmd.add_flag("--overwrite-output-dir", o.overwrite_output_dir,
               "Write into output directories (--checkpoint-dir; finetune's --output-dir, "
               "--merge-to) that hold an earlier run's files, and replace a --metrics-json file "
               "that exists; without it such a run is refused unless it resumes that run");
  cmd.add_option("--limit-train-batches", o.limit_train_batches,
                 "Batches per epoch: a fraction (0.25) or a count (10)")
      ->capture_default_str();
  // No default shown: not given, an image model's evaluations read every batch, the GPT's 16.
  cmd.add_option("--limit-val-batches", o.limit_val_batches,
                 "Batches per validation: a fraction (0.25) or a count (10); 0: no validation "
                 "(default: all; gpt: 16)");
  cmd.add_option("--limit-test-batches", o.limit_test_batches,
                 "Batches of the final evaluation after training: a fraction or a count; 0: "
                 "none (default: all; gpt: 16)");
  cmd.add_option("--val-check-interval", o.val_check_interval,
                 "Validate every fraction of an epoch (0.5) or every N batches (100)")
      ->capture_default_str();
  cmd.add_flag(
      "--no-progress-bar",
      // n: the flag's value; a config's "no-progress-bar": false gives 0 or less (off).
      [options](int64_t n) { options->progress_bar = n <= 0; },
      "Plain output without a progress bar");
  cmd.add_option("--logger", o.logger,
                 "Log metrics with csv (metrics.csv) or tensorboard (event files)");
  cmd.add_option("--log-dir", o.log_dir, "Loggers write <log-dir>/version_<N>")
      ->capture_default_str();
  cmd.add_option("--log-every-n-steps", o.log_every_n_steps,
                 "Send the training loss to the loggers every N optimizer steps")
      ->capture_default_str();
  cmd.add_option("--fp8-stats-every", o.fp8_stats_every,
                 "transformer-engine: take the FP8 statistics every N optimizer steps (0: every "
                 "--log-every-n-steps)")
      ->capture_default_str();
  cmd.add_option("--profiler", o.profiler,
                 "simple: print where the time went (per Trainer action, hook and op family)");
  cmd.add_option("--early-stopping-monitor", o.early_stopping_monitor,
                 "Stop when this logged metric stops improving (e.g. val_loss)");
  cmd.add_option("--early-stopping-mode", o.early_stopping_mode, "min or max")
      ->capture_default_str();
  cmd.add_option("--early-stopping-patience", o.early_stopping_patience,
                 "Checks without improvement before stopping")
      ->capture_default_str();
  cmd.add_option("--early-stopping-min-delta", o.early_stopping_min_delta,
                 "Smallest change that counts as an improvement")
      ->capture_default_str();
  cmd.add_option("--checkpoint-monitor", o.checkpoint_monitor,
                 "Keep the best --save-top-k checkpoints by this logged metric");
  cmd.add_option("--checkpoint-mode", o.checkpoint_mode, "min or max")->capture_default_str();
  cmd.add_option("--save-top-k", o.save_top_k, "Checkpoints kept (-1: all, 0: only last)")
      ->capture_default_str();
  cmd.add_option("--every-n-train-steps", o.every_n_train_steps,
                 "Checkpoint every N optimizer steps instead of every epoch");
}

}  // namespace mantissa::app
