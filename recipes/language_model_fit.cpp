// The fit of a language-model run: fit, stops recorded, final evaluation, metrics.
#include "mantissa/recipes/language_model_fit.h"

#include <algorithm>

#include "mantissa/core/allocator.h"
#include "mantissa/recipes/diverged_result.h"
#include "mantissa/recipes/trainer_setup.h"
#include "mantissa/train/bitsandbytes_precision.h"

namespace mantissa::recipes {

optim::OptimizerChoice language_model_optimizer_choice(const TrainOptions& o,
                                                       const train::Precision& precision,
                                                       bool embeddings_32bit) {
  optim::OptimizerChoice choice;
  choice.name = o.optimizer;
  choice.lr = o.lr;
  choice.weight_decay = o.weight_decay;
  choice.fp32_state = precision.param_dtype() == kFloat16;
  choice.optim_bits_32 = optim::split_names(o.optim_bits_32);
  choice.embeddings_32bit = embeddings_32bit;
  return choice;
}

LanguageModelFit fit_language_model(train::Trainer& trainer, models::LanguageModel& lm,
                                    data::DataLoader& train_loader, data::DataLoader& val_loader,
                                    const TrainOptions& o, const train::TrainerOptions& topts,
                                    const FitStartStep& fit_start, LanguageModelFitSetup setup,
                                    TrainMetrics& m) {
  // As the image models' (image_run.cpp): a run the Trainer stops for divergence writes its
  // metrics JSON with what it measured before the stop, then exits with status 4.
  LanguageModelFit fit;
  // As the image models: a checkpoint --checkpoint-dir could not take stops the run, which
  // writes its metrics JSON before the error.
  try {
    trainer.fit(lm, train_loader, setup.lr_find ? nullptr : &val_loader, o.resume);
  } catch (const train::TrainingDiverged& e) {
    // A range test climbs until the loss diverges: that ends its sweep (the finder recorded it).
    if (!setup.lr_find) {
      record_stopped_by_divergence(e, trainer, m);
      fit.stopped_by_divergence = std::current_exception();
    }
  } catch (const train::CheckpointSaveFailed& e) {
    fit.save_failed = checkpoint_dir_error(e, trainer, m);
  }
  // What follows treats a stopped save as it treats divergence: no final evaluation, sample or
  // --save-weights file (the run did not reach its end).
  const bool stopped = fit.stopped();
  // As the image models: a resumed run already at --max-steps (or its --epochs) says so.
  if (!stopped && !setup.lr_find && !trainer.interrupted() &&
      trainer.global_step() == fit_start.step) {
    m.nothing_trained_reason = nothing_trained_reason(
        {.max_steps = setup.max_steps,
         .max_epochs = setup.max_epochs,
         .limit_train_batches = o.limit_train_batches,
         .resume = o.resume},
        trainer,
        topts.limit_train_batches.resolve(setup.rank_batches, "--limit-train-batches", "train"));
  }
  // The reported validation loss is that of the weights the run ends with (an interrupted run
  // reports what it has and stops quickly; one stopped by divergence has no finite weights to
  // validate), over --limit-test-batches' batches of the validation text: the last
  // validation's when it read as many (a point of the curve), else a test pass (not one).
  std::optional<double> final_loss;
  if (!trainer.interrupted() && !stopped && !setup.lr_find) {
    const bool at_last_step =
        !lm.history().empty() && lm.history().back().step == trainer.global_step();
    switch (final_evaluation(trainer, val_loader, at_last_step)) {
      case FinalEvaluation::kNone:  // --limit-test-batches 0
        break;
      case FinalEvaluation::kValidate:
        trainer.validate(lm, val_loader);
        [[fallthrough]];
      case FinalEvaluation::kLastValidation:
        if (!lm.history().empty()) final_loss = lm.history().back().val_loss;
        break;
      case FinalEvaluation::kTest: {
        const auto results = trainer.test(lm, val_loader);
        if (const auto it = results.find("test_loss"); it != results.end()) final_loss = it->second;
        break;
      }
    }
  } else if (!stopped && !lm.history().empty()) {
    final_loss = lm.history().back().val_loss;
  }

  for (const models::ValidationRecord& r : lm.history()) {
    m.val_loss_steps.push_back(r.step);
    m.val_loss_curve.push_back(r.val_loss);
    m.test_loss.push_back(r.val_loss);
    m.train_loss.push_back(r.train_loss);
  }
  const double train_seconds = lm.train_seconds();
  m.steps = trainer.global_step();
  // The loss of the final weights; a run stopped by divergence has its curve only (the last
  // validation was of earlier weights).
  m.val_loss_nats_per_char = final_loss;
  m.tokens_per_second =
      train_seconds > 0 ? static_cast<double>(lm.train_tokens()) / train_seconds : 0.0;
  m.samples_per_second =
      train_seconds > 0 ? static_cast<double>(lm.train_samples()) / train_seconds : 0.0;
  m.epoch_seconds.push_back(train_seconds);
  m.peak_memory_bytes = std::max(max_memory_allocated(), setup.build_peak_bytes);
  record_gpu_memory(m, trainer.device());
  m.peak_training_memory_bytes = max_memory_allocated() - setup.baseline_bytes;
  // Quantized weights are frozen buffers, not parameters: their stored bytes count too.
  m.weight_bytes += train::BitsandbytesPrecision::quantized_stats(lm.net()).stored_bytes;
  for (const auto& p : lm.net().parameters()) {
    m.weight_bytes += p.numel() * p.dtype().itemsize();
    if (p.grad().defined()) m.gradient_bytes += p.grad().numel() * p.grad().dtype().itemsize();
  }
  if (const auto ls = trainer.precision_plugin().loss_scale_state()) {
    m.skipped_steps = ls->skipped_steps;
    m.final_loss_scale = ls->scale;
  }
  m.step_losses = trainer.step_losses();
  return fit;
}

}  // namespace mantissa::recipes
