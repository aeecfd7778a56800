#pragma once
// The Trainer options every `mantissa train` model shares, from the command line's
// TrainOptions: the limits in their "0.25 or 10" form, checkpoints, loggers and the progress
// bar, the Lightning callbacks. Used by every model (train_loop.cpp, train_gpt.cpp).
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "image_run.h"
#include "mantissa/train/trainer.h"

namespace mantissa::recipes {

// "0.25" (has a '.', 'e' or 'E') is a fraction of an epoch, "10" a number of batches. Throws
// naming `flag` for anything else, negative values and fractions above 1.
train::BatchLimit parse_batch_limit(const std::string& text, const char* flag);

// Fills precision (or the quantizing plugin), accelerator, seed, accumulate_grad_batches,
// gradient_clip_val/algorithm, limit_train_batches, val_check_interval, the ModelCheckpoint of
// --checkpoint-dir (one file per epoch and last.safetensors), the --logger and the progress
// bar (unless o.quiet or --no-progress-bar), log_every_n_steps, o.callbacks, EarlyStopping,
// the checkpoint monitor / top-k / every-n-steps, fast_dev_run, overfit_batches,
// check_val_every_n_epoch, num_sanity_val_steps, detect_anomaly, a LearningRateMonitor with a
// logger and the model summary (unless o.quiet), an Fp8StatsMonitor under the
// transformer-engine precisions. Throws for an unknown --logger and bad values.
train::TrainerOptions make_trainer_options(const TrainOptions& o);

// The metrics JSON's "fp8" object: the last interval's FP8 statistics kept by the run's
// Fp8StatsMonitor, or nothing (no FP8 layers, or the monitor is absent).
std::optional<nlohmann::json> fp8_metrics(const train::Trainer& trainer);

// The data-parallel Trainer options from the --strategy, --devices, --sync-batchnorm and
// --ddp-* flags (make_trainer_options calls it).
void apply_distributed_options(const TrainOptions& o, train::TrainerOptions& t);

}  // namespace mantissa::recipes
