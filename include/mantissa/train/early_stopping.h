#pragma once
// EarlyStopping: ends fit when a monitored metric stops improving (Lightning's EarlyStopping).
// It checks once per training epoch, after validation and the module's on_train_epoch_end
// (check_on_train_epoch_end), or after every validation run; by default (unset) the first when
// each epoch validates once, at its end, the second otherwise. An improvement must beat the best
// value so far by more than min_delta; after `patience` checks without one, it sets
// trainer.should_stop. It also stops on a non-finite value (check_finite), once the metric
// reaches stopping_threshold, or once it is worse than divergence_threshold.
//
//   train::EarlyStoppingOptions es;
//   es.monitor = "val_loss";
//   es.patience = 3;
//   opts.callbacks.push_back(std::make_shared<train::EarlyStopping>(es));
#include <cstdint>
#include <optional>
#include <string>

#include "mantissa/train/callback.h"

namespace mantissa::train {

struct EarlyStoppingOptions {
  std::string monitor;  // a logged metric, e.g. "val_loss" (required)
  double min_delta = 0.0;
  int64_t patience = 3;
  std::string mode = "min";  // "min" or "max"
  // A monitor that was not logged throws (true) or is skipped with a warning (false).
  bool strict = true;
  bool check_finite = true;
  std::optional<double> stopping_threshold;
  std::optional<double> divergence_threshold;
  // true: check at the end of each training epoch; false: after each validation run. Unset:
  // decided at setup as Lightning does, true when the Trainer validates once per epoch, at its
  // end (val_check_interval 1.0 and check_val_every_n_epoch 1), false when it validates
  // inside an epoch or skips epochs (so no validation goes unjudged, none is judged twice).
  std::optional<bool> check_on_train_epoch_end;
  bool verbose = false;  // print why it stopped (it always records stopped_reason())
};

class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options);

  std::string state_key() const override;
  bool is_monitoring() const override { return true; }
  void setup(Trainer& trainer, TrainModule& module, const std::string& stage) override;
  void on_train_epoch_end(Trainer& trainer, TrainModule& module) override;
  void on_validation_end(Trainer& trainer, TrainModule& module) override;
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;

  int64_t wait_count() const { return wait_count_; }
  std::optional<double> best_score() const { return best_score_; }
  // The epoch in which it stopped training (0: it did not).
  int64_t stopped_epoch() const { return stopped_epoch_; }
  const std::string& stopped_reason() const { return stopped_reason_; }
  const EarlyStoppingOptions& options() const { return options_; }
  // Where it checks: options().check_on_train_epoch_end, or what setup decided when unset.
  bool checks_on_train_epoch_end() const { return check_on_train_epoch_end_; }

 private:
  void check(Trainer& trainer);
  // Whether `current` should stop training, and why (empty: go on).
  std::string evaluate(double current);
  bool better(double a, double b) const;

  EarlyStoppingOptions options_;
  bool check_on_train_epoch_end_ = true;
  int64_t wait_count_ = 0;
  std::optional<double> best_score_;
  int64_t stopped_epoch_ = 0;
  std::string stopped_reason_;
};

}  // namespace mantissa::train
