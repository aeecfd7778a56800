#include "mantissa/train/train_module.h"

#include "mantissa/core/error.h"
#include "mantissa/train/trainer.h"

namespace mantissa::train {

void TrainModule::log(const std::string& name, double value, bool prog_bar,
                      std::optional<bool> on_step, std::optional<bool> on_epoch) {
  trainer().log_metric(name, value, prog_bar, on_step, on_epoch);
}

Trainer& TrainModule::trainer() const {
  MANTISSA_CHECK(trainer_ != nullptr, "TrainModule",
                 "{} is not attached to a Trainer (call Trainer::fit, validate or test first)",
                 name());
  return *trainer_;
}

}  // namespace mantissa::train
