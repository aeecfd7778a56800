#include "mantissa/recipes/diverged_result.h"

#include <fmt/format.h>

#include <cmath>

#include "mantissa/train/precision_registry.h"
#include "mantissa/train/report/metric_text.h"

namespace mantissa::recipes {
namespace {

// What to try, by how the precision computes.
std::string advice(train::Trainer& trainer) {
  train::Precision& plugin = trainer.precision_plugin();
  const train::PrecisionEntry* entry = train::find_precision(plugin.precision());
  const bool scaled = plugin.loss_scale_state().has_value();
  const bool fp16 = scaled || (entry != nullptr && entry->math == train::PrecisionMath::kFloat16);
  if (fp16 && scaled) {
    return "lower --lr, clip gradients (--gradient-clip-val 1) or train in bf16-mixed: float16 "
           "overflows above 65504, and the loss scaler skips the steps whose gradients "
           "overflow, not a forward that does";
  }
  if (fp16) {
    return "lower --lr, clip gradients (--gradient-clip-val 1), or train in 16-mixed, whose "
           "GradScaler skips the steps that overflow, or in bf16-mixed: float16 overflows above "
           "65504";
  }
  if (plugin.param_dtype() == kBFloat16)
    return "lower --lr, clip gradients (--gradient-clip-val 1) or keep float32 weights "
           "(bf16-mixed)";
  return "lower --lr or clip gradients (--gradient-clip-val 1)";
}

}  // namespace

std::string diverged_result_message(const char* evaluation, double loss, train::Trainer& trainer) {
  if (std::isfinite(loss)) return "";
  return fmt::format(
      "the {} loss of the final weights is {} ({}, after {} optimizer steps): the run diverged, "
      "and its metrics and checkpoints describe weights whose outputs are not finite; {}",
      evaluation, train::metric_text(loss), trainer.precision_plugin().precision(),
      trainer.global_step(), advice(trainer));
}

void record_stopped_by_divergence(const train::TrainingDiverged& error,
                                  const train::Trainer& trainer, TrainMetrics& m) {
  m.diverged = error.what();
  m.diverged_after_step = trainer.global_step();
  m.diverged_in_epoch = trainer.current_epoch() + 1;
}

train::CheckpointSaveFailed checkpoint_dir_error(const train::CheckpointSaveFailed& error,
                                                 const train::Trainer& trainer, TrainMetrics& m) {
  const std::string message = fmt::format(
      "[--checkpoint-dir] could not write the checkpoint {} ({}), so the run stopped after "
      "optimizer step {}; make {} a writable directory with room for the checkpoints, or pass "
      "another --checkpoint-dir, and run again",
      error.path(), error.reason(), trainer.global_step(), error.dirpath());
  m.checkpoint_save_failed = message;
  return train::CheckpointSaveFailed(message, error.path(), error.dirpath(), error.reason(),
                                     error.every_rank());
}

}  // namespace mantissa::recipes
