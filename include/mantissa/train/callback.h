#pragma once
// Callback: the Trainer's hooks, for code that does not belong in the model (checkpointing,
// logging, early stopping). Every hook does nothing by default. Callbacks run before the
// TrainModule's hook of the same name, in the order they were given, except "monitoring"
// callbacks (ModelCheckpoint), whose on_train_epoch_end runs after the module's so they see
// what it logged (Lightning's order).
#include <cstdint>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "mantissa/core/tensor.h"
#include "mantissa/data/dataset.h"
#include "mantissa/optim/optimizer.h"

namespace mantissa::train {

class Trainer;
class TrainModule;

class Callback {
 public:
  virtual ~Callback() = default;

  // The key of this callback's state in a checkpoint (unique among a trainer's callbacks).
  virtual std::string state_key() const { return "Callback"; }
  virtual bool is_monitoring() const { return false; }

  // Lightning's setup / teardown: fit, validate, test or predict is beginning (before the
  // module's configure_model and the checkpoint restore) or ending normally (after on_fit_end,
  // before the loggers are finalised); stage is "fit", "validate", "test" or "predict".
  virtual void setup(Trainer& /*trainer*/, TrainModule& /*module*/, const std::string& /*stage*/) {}
  virtual void teardown(Trainer& /*trainer*/, TrainModule& /*module*/,
                        const std::string& /*stage*/) {}
  // fit, validate, test or predict is ending with an exception (Lightning's on_exception): every
  // callback's runs, in order, then the exception propagates; teardown does not run. A throw
  // from here is reported as a warning and does not replace the exception.
  virtual void on_exception(Trainer& /*trainer*/, TrainModule& /*module*/,
                            const std::exception& /*exception*/) {}

  virtual void on_fit_start(Trainer& /*trainer*/, TrainModule& /*module*/) {}
  virtual void on_fit_end(Trainer& /*trainer*/, TrainModule& /*module*/) {}
  virtual void on_train_start(Trainer& /*trainer*/, TrainModule& /*module*/) {}
  virtual void on_train_end(Trainer& /*trainer*/, TrainModule& /*module*/) {}
  virtual void on_train_epoch_start(Trainer& /*trainer*/, TrainModule& /*module*/) {}
  virtual void on_train_epoch_end(Trainer& /*trainer*/, TrainModule& /*module*/) {}
  virtual void on_train_batch_start(Trainer& /*trainer*/, TrainModule& /*module*/,
                                    const data::Example& /*batch*/, int64_t /*batch_idx*/) {}
  // loss: what training_step returned (detached; undefined when it skipped the step).
  virtual void on_train_batch_end(Trainer& /*trainer*/, TrainModule& /*module*/,
                                  const Tensor& /*loss*/, const data::Example& /*batch*/,
                                  int64_t /*batch_idx*/) {}
  virtual void on_validation_start(Trainer& /*trainer*/, TrainModule& /*module*/) {}
  virtual void on_validation_end(Trainer& /*trainer*/, TrainModule& /*module*/) {}
  virtual void on_validation_epoch_start(Trainer& /*trainer*/, TrainModule& /*module*/) {}
  virtual void on_validation_epoch_end(Trainer& /*trainer*/, TrainModule& /*module*/) {}
  virtual void on_test_start(Trainer& /*trainer*/, TrainModule& /*module*/) {}
  virtual void on_test_end(Trainer& /*trainer*/, TrainModule& /*module*/) {}
  virtual void on_test_epoch_start(Trainer& /*trainer*/, TrainModule& /*module*/) {}
  virtual void on_test_epoch_end(Trainer& /*trainer*/, TrainModule& /*module*/) {}
  virtual void on_before_zero_grad(Trainer& /*trainer*/, TrainModule& /*module*/,
                                   optim::Optimizer& /*optimizer*/) {}
  // loss: the tensor about to be differentiated (scaled under 16-mixed, as in Lightning).
  virtual void on_before_backward(Trainer& /*trainer*/, TrainModule& /*module*/,
                                  const Tensor& /*loss*/) {}
  virtual void on_after_backward(Trainer& /*trainer*/, TrainModule& /*module*/) {}
  // Gradients are unscaled here (16-mixed) and not yet clipped.
  virtual void on_before_optimizer_step(Trainer& /*trainer*/, TrainModule& /*module*/,
                                        optim::Optimizer& /*optimizer*/) {}

  // fit is stopping early for a signal (Trainer::interrupted()), after a complete training
  // batch and before its epoch ends; on_train_end and on_fit_end do not run. ModelCheckpoint
  // writes last.safetensors here.
  virtual void on_train_interrupted(Trainer& /*trainer*/, TrainModule& /*module*/) {}

  // Checkpoint state (stored as JSON under state_key()).
  virtual nlohmann::json state_dict() const { return nlohmann::json::object(); }
  virtual void load_state_dict(const nlohmann::json& /*state*/) {}
};

}  // namespace mantissa::train
