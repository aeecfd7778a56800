#pragma once
// Timer: ends training once a time budget is spent (Lightning's Timer, which the Trainer adds
// for TrainerOptions::max_time). It measures the training loop from on_train_start, plus the
// training time a resumed checkpoint had already spent (its state travels in checkpoints, as
// Lightning's), and sets trainer.should_stop once the budget is reached, so the run ends as
// any early stop does: the epoch ends (validation, on_train_epoch_end, ModelCheckpoint's
// checkpoints and last.safetensors with save_last), subject to min_epochs / min_steps.
//
//   o.max_time = std::chrono::hours(12);               // or parse_max_time("00:12:00:00")
#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "mantissa/train/callback.h"

namespace mantissa::train {

struct TimerOptions {
  std::chrono::duration<double> duration{0};  // >= 0
  // "step": checked after every optimizer step and after every validation that follows one
  // (not inside an accumulation window, so the checkpoints written as the run stops resume
  // exactly); "epoch": at every epoch's end (after its validation).
  std::string interval = "step";
  bool verbose = true;  // say when the budget is spent (stdout)
  // Seconds on a monotonic clock; empty: std::chrono::steady_clock. Tests give their own.
  std::function<double()> clock;
};

class Timer : public Callback {
 public:
  explicit Timer(TimerOptions options);

  std::string state_key() const override { return "Timer"; }
  // A budget already spent by the checkpoint's run stops the fit before its first batch.
  void on_fit_start(Trainer& trainer, TrainModule& module) override;
  void on_train_start(Trainer& trainer, TrainModule& module) override;
  void on_train_end(Trainer& trainer, TrainModule& module) override;
  void on_train_interrupted(Trainer& trainer, TrainModule& module) override;
  void on_exception(Trainer& trainer, TrainModule& module, const std::exception& error) override;
  void on_train_batch_end(Trainer& trainer, TrainModule& module, const Tensor& loss,
                          const data::Example& batch, int64_t batch_idx) override;
  // "step": also after every validation of the training loop that follows an optimizer step,
  // so a validation that spends the budget ends the run at once.
  void on_validation_end(Trainer& trainer, TrainModule& module) override;
  void on_train_epoch_end(Trainer& trainer, TrainModule& module) override;
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;

  // Seconds of training so far, a resumed checkpoint's included.
  double time_elapsed() const;
  double time_remaining() const { return options_.duration.count() - time_elapsed(); }
  const TimerOptions& options() const { return options_; }

 private:
  double now() const;
  void check(Trainer& trainer);

  TimerOptions options_;
  std::optional<double> start_, end_;
  double offset_ = 0;  // training seconds of the run a checkpoint resumed
  int64_t step_checked_ = -1;
  bool in_window_ = false;  // the last training batch ended inside an accumulation window
  bool training_ = false;   // between on_train_start and the training loop's end
  bool reported_ = false;
};

// Lightning's max_time string "DD:HH:MM:SS" (days, then two digits each of hours below 24,
// minutes and seconds below 60: "00:12:00:00" is 12 hours). `what` names the option in the
// error ("--max-time"), which gives the valid form.
std::chrono::seconds parse_max_time(const std::string& text, const std::string& what);

// A duration as Lightning prints one ("1 day, 2:03:04", "0:00:30").
std::string format_duration(double seconds);

}  // namespace mantissa::train
