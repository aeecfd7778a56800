#pragma once
// TrainModule: the model plus how to train it (Lightning's LightningModule). It is an
// nn::Module: register layers in the constructor or in configure_model(), and override
//   training_step   -> the loss of a batch (an undefined Tensor skips the optimizer step),
//   validation_step / test_step (optional; log() what to report),
//   configure_optimizers -> the optimizer and its LR schedulers.
// The hooks (on_train_start, on_before_backward, ...) run in Lightning's order; docs/trainer.md
// lists it.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mantissa/core/dtype.h"
#include "mantissa/data/dataset.h"
#include "mantissa/nn/module.h"
#include "mantissa/optim/lr_scheduler.h"
#include "mantissa/optim/optimizer.h"

namespace mantissa::train {

class Trainer;
class Precision;

// An LR scheduler and when it steps: every `frequency` optimizer steps ("step") or epochs
// ("epoch"). Schedulers also step when a loss scaler skipped the optimizer step (Lightning).
struct LRSchedulerConfig {
  std::shared_ptr<optim::LRScheduler> scheduler;
  std::string interval = "epoch";
  int64_t frequency = 1;
  // The logged metric a metric-driven scheduler (ReduceLROnPlateau) is stepped with; required
  // for those. strict: a monitor missing from the logged metrics throws; otherwise that step
  // is skipped with a warning (Lightning's "strict").
  std::string monitor;
  bool strict = true;
};

// What configure_optimizers returns: one optimizer in `optimizer`, or several in `optimizers`
// (not both), and any number of schedulers over them. Automatic optimisation steps exactly
// one optimizer, as in Lightning 2; several need manual optimisation (TrainModule::
// automatic_optimization = false), where training_step steps them itself.
struct OptimizerConfig {
  std::shared_ptr<optim::Optimizer> optimizer;
  std::vector<LRSchedulerConfig> lr_schedulers;
  std::vector<std::shared_ptr<optim::Optimizer>> optimizers;
};

class TrainModule : public nn::Module {
 public:
  explicit TrainModule(std::string name = "TrainModule") : nn::Module(std::move(name)) {}

  // Required: the loss of one training batch, or an undefined Tensor to skip the step.
  virtual Tensor training_step(const data::Example& batch, int64_t batch_idx) = 0;
  // For TrainerOptions::cuda_graphs (docs/cuda.md, "CUDA graphs"): the loss of a training batch
  // as a pure function of its input and target, which a CUDA graph can capture once and replay
  // for every batch: no item() or other host read, no log(), the same shapes each batch.
  // Undefined (the default): the module cannot be graphed. A module that gives it usually
  // writes training_step as training_loss plus on_training_loss(loss.item()).
  virtual Tensor training_loss(const data::Example& /*batch*/) { return Tensor(); }
  // Called by a graphed fit after each batch with the loss's value: what training_step would
  // log or accumulate from it.
  virtual void on_training_loss(double /*loss*/) {}
  // An item-weighted loss (transformers' num_items_in_batch): a module whose loss is a mean over
  // items whose number varies from batch to batch (the trained tokens of completion-only data)
  // returns how many items `batch` (as the loader gives it) holds. The Trainer then counts the
  // items of all the batches of each optimizer step (the accumulated ones, and every rank's
  // under TrainerOptions::average_items_across_ranks) before the step's first training_step,
  // which returns the batch's summed item losses times trainer().item_loss_scale(): its share
  // of the step's loss. The Trainer neither divides the shares by accumulate_grad_batches nor
  // averages them: the step's loss is their sum (the mean over every item of the step), so a
  // step's gradient is the same however its batches are split over micro-batches and ranks.
  // std::nullopt (the default): training_step returns the batch's mean loss, and the Trainer
  // averages the batches of a step. Not used under manual optimisation or CUDA graphs (whose
  // one batch per step on one process is the step's mean already).
  virtual std::optional<int64_t> loss_items(const data::Example& /*batch*/) { return std::nullopt; }
  virtual void validation_step(const data::Example& /*batch*/, int64_t /*batch_idx*/) {}
  virtual void test_step(const data::Example& /*batch*/, int64_t /*batch_idx*/) {}
  // What Trainer::predict collects per batch; by default, as in Lightning, the module's
  // forward of the batch's input.
  virtual Tensor predict_step(const data::Example& batch, int64_t /*batch_idx*/) {
    return forward(batch.input);
  }
  // forward(input) followed by the precision plugin's convert_output: what a step should call
  // where PyTorch code calls self(x). Under Apex O2/O3 the outputs come back as float32, as
  // from the forward amp.initialize patches; the other plugins return forward(input) as is,
  // and so does a module outside a Trainer.
  Tensor precision_forward(const Tensor& input);
  virtual OptimizerConfig configure_optimizers() = 0;
  // Builds layers inside the precision plugin's init scope (parameters born in its dtype).
  virtual void configure_model() {}

  // Records a metric. Defaults as in Lightning: in training on_step, in validation/test
  // on_epoch (the epoch's mean). prog_bar marks it for the progress bar.
  void log(const std::string& name, double value, bool prog_bar = false,
           std::optional<bool> on_step = std::nullopt, std::optional<bool> on_epoch = std::nullopt);

  // The trainer running this module; throws outside fit/validate/test.
  Trainer& trainer() const;

  // ---- manual optimisation (Lightning's automatic_optimization = False) ----
  // Set to false in the constructor to step the optimizers yourself in training_step:
  //   auto& gen = optimizers()[0]; ...
  //   gen->zero_grad(); manual_backward(loss_g); manual_step(*gen);
  // The Trainer then neither zeroes gradients, calls backward nor steps optimizers or LR
  // schedulers (step them with lr_schedulers()[i].scheduler->step()); every manual_step
  // counts as one global step, as in Lightning. accumulate_grad_batches and
  // gradient_clip_val are refused (clip with clip_gradients() before manual_step).
  bool automatic_optimization = true;
  // The optimizers configure_optimizers returned, in order (during fit).
  const std::vector<std::shared_ptr<optim::Optimizer>>& optimizers() const;
  const std::vector<LRSchedulerConfig>& lr_schedulers() const;
  // backward through the precision plugin (loss scaling under 16-mixed), between the
  // on_before_backward / on_after_backward hooks.
  void manual_backward(const Tensor& loss);
  // The optimizer step through the plugin: unscales, runs the on_before_optimizer_step hooks,
  // skips the update on inf/NaN gradients under loss scaling. Returns whether it updated.
  bool manual_step(optim::Optimizer& optimizer);
  // Clips the optimizer's gradients through the plugin ("norm" or "value"); call it between
  // manual_backward and manual_step.
  void clip_gradients(optim::Optimizer& optimizer, double clip_val,
                      const std::string& algorithm = "norm");

  // Hooks (see Callback for their arguments and when they run).
  // setup runs before configure_model, so a module may build or load what its layers need
  // there; stage is "fit", "validate", "test" or "predict". teardown runs when that stage
  // ends normally.
  virtual void setup(const std::string& /*stage*/) {}
  virtual void teardown(const std::string& /*stage*/) {}
  virtual void on_fit_start() {}
  virtual void on_fit_end() {}
  virtual void on_train_start() {}
  virtual void on_train_end() {}
  virtual void on_train_epoch_start() {}
  virtual void on_train_epoch_end() {}
  virtual void on_train_batch_start(const data::Example& /*batch*/, int64_t /*batch_idx*/) {}
  virtual void on_train_batch_end(const Tensor& /*loss*/, const data::Example& /*batch*/,
                                  int64_t /*batch_idx*/) {}
  virtual void on_validation_start() {}
  virtual void on_validation_end() {}
  virtual void on_validation_epoch_start() {}
  virtual void on_validation_epoch_end() {}
  virtual void on_test_start() {}
  virtual void on_test_end() {}
  virtual void on_test_epoch_start() {}
  virtual void on_test_epoch_end() {}
  virtual void on_before_zero_grad(optim::Optimizer& /*optimizer*/) {}
  virtual void on_before_backward(const Tensor& /*loss*/) {}
  virtual void on_after_backward() {}
  virtual void on_before_optimizer_step(optim::Optimizer& /*optimizer*/) {}

  // Lightning's on_save_checkpoint / on_load_checkpoint: state of the module beyond its
  // parameters and buffers (a metrics history, counters), stored in the checkpoint's metadata
  // as the JSON object `state` (key "module"). on_load_checkpoint runs last when a checkpoint
  // is restored, with the saved object ({} for a checkpoint without one); it should validate
  // before changing anything, since a throw there rolls the rest of the restore back.
  virtual void on_save_checkpoint(nlohmann::json& /*state*/) const {}
  virtual void on_load_checkpoint(const nlohmann::json& /*state*/) {}
  // Runs on every rank right before a checkpoint is collected (rank 0 alone collects and writes
  // it, so on_save_checkpoint runs there only): under ddp a module gathers here, with
  // collectives, the whole job's share of what on_save_checkpoint saves (running sums of the
  // epoch in progress). Every rank saves after the same step, so the collectives meet.
  virtual void on_before_save_checkpoint() {}

  // Lightning's save_hyperparameters / hparams: what the module was built from (a JSON object:
  // sizes, adapter rank and alpha, ...). Checkpoints store it as "hyper_parameters", so a tool
  // that only has the file (`mantissa eval`) can rebuild the same model. Not restored on
  // resume: the module is already built by then.
  void save_hyperparameters(nlohmann::json hparams);
  const nlohmann::json& hparams() const { return hparams_; }

 private:
  friend class Trainer;
  Trainer* trainer_ = nullptr;
  bool model_configured_ = false;  // configure_model runs once per module
  nlohmann::json hparams_ = nlohmann::json::object();
  // The plugin that converted this module: fit then validate with one Trainer converts once.
  const Precision* converted_by_ = nullptr;
  // Its precision and parameter dtype (the plugin may be gone), for the error when another
  // Trainer's precision finds the parameters still in that dtype.
  std::string converted_precision_;
  DType converted_param_dtype_ = kFloat32;
};

}  // namespace mantissa::train
