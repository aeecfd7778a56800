#pragma once
// The fit of a language model run, shared by `mantissa train --model gpt` (gpt_run.h) and
// `mantissa finetune` (finetune_run.h): the training spine's fit (run_fit.h), the final
// evaluation (the last validation when it was at the last step, else a validation or test
// pass), and the run's curve, speed and memory in the metrics.
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "mantissa/data/dataloader.h"
#include "mantissa/models/language_model.h"
#include "mantissa/optim/optimizer_factory.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/recipes/run_fit.h"
#include "mantissa/recipes/run_metrics.h"
#include "mantissa/recipes/trainer_setup.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/trainer.h"

namespace mantissa::recipes {

struct LanguageModelFitSetup {
  int64_t max_steps = -1;  // the run's limits (-1: none), for the nothing-trained reason
  int64_t max_epochs = -1;
  int64_t rank_batches = 0;      // training batches per epoch of this rank
  bool lr_find = false;          // a range test: no final evaluation, divergence ends the sweep
  int64_t baseline_bytes = 0;    // memory_allocated() before the model was built
  int64_t build_peak_bytes = 0;  // the build's peak (loading, quantizing)
};

// Prints a line after every validation of a LanguageModel ("step 250/2000  train loss 1.9  val
// loss 1.8 nats/byte  5120 tokens/s"), `unit` naming what the losses are per; on a terminal it
// clears the progress bar's open line first (the bar redraws below).
class ValidationPrinter : public train::Callback {
 public:
  ValidationPrinter(std::string unit, bool tty) : unit_(std::move(unit)), tty_(tty) {}
  // Known once the Trainer (and so the number of ranks sharing an epoch) is.
  void set_total_steps(int64_t total_steps) { total_steps_ = total_steps; }
  void on_validation_end(train::Trainer& trainer, train::TrainModule& module) override;

 private:
  std::string unit_;
  bool tty_;
  int64_t total_steps_ = 0;
};

// Puts `printer` among `t`'s callbacks ahead of the EarlyStopping made from the flags
// (make_trainer_options), which judges the same validation in its on_validation_end: the
// validation's line then precedes the early-stopping decision based on it.
void add_validation_printer(train::TrainerOptions& t, std::shared_ptr<ValidationPrinter> printer);

// The --optimizer choice of a language-model run: its name, lr, weight decay and
// --optim-bits-32 names; fp32 state under fp16 parameters. `embeddings_32bit`: the embedding
// keeps 32-bit state under an 8-bit optimizer (bitsandbytes' advice when it trains).
optim::OptimizerChoice language_model_optimizer_choice(const TrainOptions& o,
                                                       const train::Precision& precision,
                                                       bool embeddings_32bit);

// Runs the spine's fit (run_fit.h: trainer.fit(lm, train_loader, val_loader, o.resume), stops
// recorded, the nothing-trained reason) and the final evaluation, and fills `m`: steps, the final
// validation loss (val_loss_nats_per_char: nats per byte or token), the validation curve, tokens
// and samples per second, epoch seconds and peak memory. The end-of-run records common to every
// run are record_fit_end's (run_fit.h). `fit_start` must be among the Trainer's callbacks.
FitOutcome fit_language_model(train::Trainer& trainer, models::LanguageModel& lm,
                              data::DataLoader& train_loader, data::DataLoader& val_loader,
                              const TrainOptions& o, const train::TrainerOptions& topts,
                              const FitStartStep& fit_start, LanguageModelFitSetup setup,
                              TrainMetrics& m);

}  // namespace mantissa::recipes
