#include "mantissa/train/train_module.h"

#include "mantissa/core/error.h"
#include "mantissa/train/trainer.h"

namespace mantissa::train {

void TrainModule::log(const std::string& name, double value, bool prog_bar,
                      std::optional<bool> on_step, std::optional<bool> on_epoch) {
  trainer().log_metric(name, value, prog_bar, on_step, on_epoch);
}

Tensor TrainModule::precision_forward(const Tensor& input) {
  Tensor output = forward(input);
  return trainer_ ? trainer_->precision_plugin().convert_output(output) : output;
}

void TrainModule::save_hyperparameters(nlohmann::json hparams) {
  MANTISSA_CHECK(hparams.is_object(), "save_hyperparameters",
                 "the hyperparameters must be a JSON object (name -> value), got {}",
                 hparams.type_name());
  hparams_ = std::move(hparams);
}

Trainer& TrainModule::trainer() const {
  MANTISSA_CHECK(trainer_ != nullptr, "TrainModule",
                 "{} is not attached to a Trainer (call Trainer::fit, validate or test first)",
                 name());
  return *trainer_;
}

const std::vector<std::shared_ptr<optim::Optimizer>>& TrainModule::optimizers() const {
  return trainer().optimizers();
}

const std::vector<LRSchedulerConfig>& TrainModule::lr_schedulers() const {
  return trainer().lr_schedulers();
}

void TrainModule::manual_backward(const Tensor& loss) { trainer().manual_backward(loss); }

bool TrainModule::manual_step(optim::Optimizer& optimizer) {
  return trainer().manual_step(optimizer);
}

void TrainModule::clip_gradients(optim::Optimizer& optimizer, double clip_val,
                                 const std::string& algorithm) {
  trainer().manual_clip_gradients(optimizer, clip_val, grad_clip_algorithm_from_string(algorithm));
}

}  // namespace mantissa::train
