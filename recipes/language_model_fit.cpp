// The fit of a language-model run: the spine's fit (run_fit.h), its final evaluation and
// the language model's numbers.
#include "mantissa/recipes/language_model_fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "mantissa/core/allocator.h"
#include "mantissa/core/warning.h"
#include "mantissa/recipes/trainer_setup.h"
#include "mantissa/train/early_stopping.h"
#include "mantissa/train/report/metric_text.h"

namespace mantissa::recipes {
namespace {

// The optimizer steps in [from, to) (global steps, counted from 0) that trained no token: a
// fine-tune's steps whose blocks hold prompt tokens only have no loss (NaN in step_losses,
// train/step_items.h). A resumed run without the checkpoint's history counts what it has.
int64_t steps_without_tokens(const train::Trainer& trainer, int64_t from, int64_t to) {
  const std::vector<double>& losses = trainer.step_losses();
  const int64_t offset = trainer.global_step() - static_cast<int64_t>(losses.size());
  int64_t n = 0;
  for (int64_t s = std::max(from, offset); s < to; ++s) n += std::isnan(losses[s - offset]);
  return n;
}

// Once, after a fit most of whose steps trained no token: why, and what to do.
void warn_if_most_steps_trained_nothing(const train::Trainer& trainer, int64_t first_step) {
  const int64_t steps = trainer.global_step() - first_step;
  const int64_t empty = steps_without_tokens(trainer, first_step, trainer.global_step());
  if (steps == 0 || 2 * empty <= steps) return;
  warn_once(fmt::format(
      "{} of the {} optimizer steps trained no token: their --block-size windows hold prompt "
      "tokens only (the completions fall outside them), so those steps have no token to learn "
      "from, no loss (null in step_losses) and no weight update; a larger --block-size puts the "
      "completions in the windows",
      empty, steps));
}

}  // namespace

void ValidationPrinter::on_validation_end(train::Trainer& trainer, train::TrainModule& module) {
  const auto& lm = dynamic_cast<const models::LanguageModel&>(module);
  if (lm.history().empty() || trainer.sanity_checking()) return;
  const models::ValidationRecord& r = lm.history().back();
  const double tokens_per_second =
      lm.train_seconds() > 0 ? static_cast<double>(lm.train_tokens()) / lm.train_seconds() : 0;
  // (A resumed run validates before its first batch when the checkpoint was saved between a
  // batch and its validation: no speed to show yet.) tokens/s is the whole job's under ddp
  // (LanguageModel counts every rank's tokens).
  const std::string speed =
      tokens_per_second > 0 ? fmt::format("  {:.0f} tokens/s", tokens_per_second) : "";
  // The train loss is the mean over the steps since the previous validation (the run's start for
  // the first): labelled with their count, as the progress bar's loss is the epoch's mean.
  const std::vector<models::ValidationRecord>& h = lm.history();
  const int64_t since = r.step - (h.size() >= 2 ? h[h.size() - 2].step : 0);
  // Steps without a trained token have no loss: L is the mean of the others.
  const int64_t empty = steps_without_tokens(trainer, r.step - since, r.step);
  const std::string untrained = empty > 0 ? fmt::format(", {} trained no token", empty) : "";
  fmt::print("{}step {}/{}  train loss (last {} step{}{}) {}  val loss {} {}{}\n",
             tty_ ? "\r\033[K" : "", r.step, total_steps_, since, since == 1 ? "" : "s", untrained,
             train::metric_text(r.train_loss), train::metric_text(r.val_loss), unit_, speed);
  std::fflush(stdout);
}

void add_validation_printer(train::TrainerOptions& t, std::shared_ptr<ValidationPrinter> printer) {
  const auto stopping = std::find_if(t.callbacks.begin(), t.callbacks.end(), [](const auto& c) {
    return dynamic_cast<const train::EarlyStopping*>(c.get()) != nullptr;
  });
  t.callbacks.insert(stopping, std::move(printer));
}

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

FitOutcome fit_language_model(train::Trainer& trainer, models::LanguageModel& lm,
                              data::DataLoader& train_loader, data::DataLoader& val_loader,
                              const TrainOptions& o, const train::TrainerOptions& topts,
                              const FitStartStep& fit_start, LanguageModelFitSetup setup,
                              TrainMetrics& m) {
  const FitOutcome fit = run_fit(trainer, lm, train_loader,
                                 {.val_loader = setup.lr_find ? nullptr : &val_loader,
                                  .resume = o.resume,
                                  .lr_find = setup.lr_find,
                                  .limits = {.max_steps = setup.max_steps,
                                             .max_epochs = setup.max_epochs,
                                             .limit_train_batches = o.limit_train_batches,
                                             .resume = o.resume},
                                  .batches_per_epoch = topts.limit_train_batches.resolve(
                                      setup.rank_batches, "--limit-train-batches", "train"),
                                  .fit_start = &fit_start},
                                 m);
  warn_if_most_steps_trained_nothing(trainer, fit_start.step);
  // What follows treats a stopped save as it treats divergence: no final evaluation, sample or
  // --save-weights file (the run did not reach its end).
  const bool stopped = fit.stopped();
  // The reported validation loss is that of the weights the run ends with (an interrupted run
  // reports what it has and stops quickly; one stopped by divergence has no finite weights to
  // validate), over --limit-test-batches' batches of the validation text: the last
  // validation's when it read as many (a point of the curve), else a test pass (not one).
  std::optional<double> final_loss;
  if (!trainer.interrupted() && !stopped && !setup.lr_find) {
    const bool at_last_step =
        !lm.history().empty() && lm.history().back().step == trainer.global_step();
    const FinalWeightsEvaluation e = evaluate_final_weights(trainer, lm, val_loader, at_last_step);
    if (e.source == FinalEvaluation::kLastValidation && !lm.history().empty())
      final_loss = lm.history().back().val_loss;
    if (const auto it = e.test_results.find("test_loss"); it != e.test_results.end())
      final_loss = it->second;
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
  // One entry an epoch, the part of one that the run's end cut short included (the metrics
  // JSON's "epochs" has the fraction).
  lm.close_open_epoch();
  m.epoch_seconds = lm.epoch_seconds();
  m.epoch_samples_per_second = lm.epoch_samples_per_second();
  m.peak_memory_bytes = std::max(max_memory_allocated(), setup.build_peak_bytes);
  record_gpu_memory(m, trainer.device());
  m.peak_training_memory_bytes = max_memory_allocated() - setup.baseline_bytes;
  return fit;
}

}  // namespace mantissa::recipes
