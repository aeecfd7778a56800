#include "trainer_setup.h"

#include <cmath>

#include "fp8_options.h"
#include "mantissa/core/error.h"
#include "mantissa/train/logger.h"
#include "mantissa/train/model_checkpoint.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/progress_bar_callback.h"
#include "quant_options.h"

namespace mantissa::app {

train::BatchLimit parse_batch_limit(const std::string& s, const char* flag) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  MANTISSA_CHECK(used == s.size() && used > 0 && std::isfinite(v) && v >= 0, "train",
                 "{} expects a fraction like 0.25 or a batch count like 10, got '{}'", flag, s);
  if (s.find_first_of(".eE") != std::string::npos) {
    MANTISSA_CHECK(v <= 1, "train", "{} as a fraction must be at most 1.0, got {}", flag, s);
    return train::BatchLimit::fraction(v);
  }
  return train::BatchLimit::batches(static_cast<int64_t>(v));
}

train::TrainerOptions make_trainer_options(const TrainOptions& o) {
  train::TrainerOptions t;
  // nf4/fp4/int8 modes: the bitsandbytes plugin object (with the --quant-* options).
  t.plugin = make_quant_plugin(o.precision, o.quant);
  if (!t.plugin) t.precision = train::normalize_precision(o.precision);  // warns for aliases
  t.accelerator = "cpu";
  t.precision_options = settings_for(t.precision, o.precision_options, /*strict=*/true);
  t.accumulate_grad_batches = o.accumulate_grad_batches;
  t.gradient_clip_val = o.gradient_clip_val;
  t.gradient_clip_algorithm = o.gradient_clip_algorithm;
  t.limit_train_batches = parse_batch_limit(o.limit_train_batches, "--limit-train-batches");
  t.val_check_interval = parse_batch_limit(o.val_check_interval, "--val-check-interval");
  t.enable_progress_bar = o.progress_bar && !o.quiet;
  t.enable_checkpointing = !o.checkpoint_dir.empty();
  t.seed = o.seed;
  if (!o.checkpoint_dir.empty()) {
    train::ModelCheckpointOptions mc;
    mc.dirpath = o.checkpoint_dir;
    mc.save_top_k = -1;  // one file per epoch
    mc.save_last = true;
    t.callbacks.push_back(std::make_shared<train::ModelCheckpoint>(mc));
  }
  MANTISSA_CHECK(o.logger.empty() || o.logger == "csv" || o.logger == "tensorboard", "train",
                 "unknown --logger '{}'; valid values are: csv, tensorboard", o.logger);
  if (o.logger == "csv") t.loggers.push_back(std::make_shared<train::CSVLogger>(".", o.log_dir));
  if (o.logger == "tensorboard") {
    t.loggers.push_back(std::make_shared<train::TensorBoardLogger>(".", o.log_dir));
  }
  if (t.enable_progress_bar) t.callbacks.push_back(std::make_shared<train::ProgressBarCallback>());
  return t;
}

}  // namespace mantissa::app
