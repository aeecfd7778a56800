#include "mantissa/train/timer.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <vector>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/train/trainer.h"

namespace mantissa::train {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace

Timer::Timer(TimerOptions options) : options_(std::move(options)) {
  MANTISSA_CHECK(std::isfinite(options_.duration.count()) && options_.duration.count() >= 0,
                 "Timer", "duration must be a finite time >= 0, got {} s",
                 options_.duration.count());
  MANTISSA_CHECK(options_.interval == "step" || options_.interval == "epoch", "Timer",
                 "interval must be 'step' or 'epoch', got '{}'", options_.interval);
  if (!options_.clock) options_.clock = steady_seconds;
}

double Timer::now() const { return options_.clock(); }

double Timer::time_elapsed() const {
  if (!start_) return offset_;
  return offset_ + end_.value_or(now()) - *start_;
}

void Timer::on_fit_start(Trainer& trainer, TrainModule&) {
  start_.reset();
  end_.reset();
  step_checked_ = -1;
  in_window_ = false;
  training_ = false;
  reported_ = false;
  check(trainer);
}

void Timer::on_train_start(Trainer& trainer, TrainModule&) {
  start_ = now();
  step_checked_ = trainer.global_step();
  in_window_ = false;  // a fit starts (or resumes) at an optimizer step
  training_ = true;
}

void Timer::on_train_end(Trainer&, TrainModule&) {
  end_ = now();
  training_ = false;
}

void Timer::on_train_interrupted(Trainer&, TrainModule&) { training_ = false; }

void Timer::on_exception(Trainer&, TrainModule&, const std::exception&) { training_ = false; }

void Timer::on_train_batch_end(Trainer& trainer, TrainModule&, const Tensor&, const data::Example&,
                               int64_t) {
  if (options_.interval != "step") return;
  // After optimizer steps only: a stop inside an accumulation window would leave checkpoints
  // that cannot continue it (Lightning checks after every batch).
  in_window_ = trainer.global_step() == step_checked_;
  if (in_window_) return;
  step_checked_ = trainer.global_step();
  check(trainer);
}

void Timer::on_validation_end(Trainer& trainer, TrainModule&) {
  // A validation inside the training loop counts in the budget, and a long one can spend it.
  // Checked only after the optimizer step before it, the run would train one more step and,
  // as any early stop does, validate again before it ends: a second long validation past the
  // budget. So "step" checks here too (Lightning checks at the next batch's end). Not inside an
  // accumulation window (the window's step checks), not for the sanity check or a validate()
  // outside fit; "epoch" checks at the epoch's end, which follows its last validation.
  if (options_.interval != "step" || !training_ || in_window_ || trainer.sanity_checking()) {
    return;
  }
  check(trainer);
}

void Timer::on_train_epoch_end(Trainer& trainer, TrainModule&) {
  if (options_.interval == "epoch") check(trainer);
}

void Timer::check(Trainer& trainer) {
  const double elapsed = time_elapsed();
  // Every rank must stop after the same step (or the others wait forever): rank 0's clock
  // decides for all, as Lightning broadcasts rank 0's decision.
  std::vector<double> spent = {
      trainer.strategy().is_global_zero() && elapsed >= options_.duration.count() ? 1.0 : 0.0};
  trainer.strategy().sum_over_ranks(spent);
  if (spent[0] == 0) return;
  trainer.should_stop = true;
  if (options_.verbose && !reported_ && trainer.strategy().is_global_zero()) {
    fmt::print(
        "mantissa: time limit reached: {} of training (max_time {}) after step {}; "
        "stopping\n",
        format_duration(elapsed), format_duration(options_.duration.count()),
        trainer.global_step());
  }
  reported_ = true;
}

nlohmann::json Timer::state_dict() const { return {{"time_elapsed", time_elapsed()}}; }

void Timer::load_state_dict(const nlohmann::json& state) {
  const auto it = state.find("time_elapsed");
  MANTISSA_CHECK(it != state.end() && it->is_number() && std::isfinite(it->get<double>()) &&
                     it->get<double>() >= 0,
                 "Timer",
                 "corrupt callback state in checkpoint: time_elapsed must be a number of "
                 "seconds >= 0, got {}",
                 it == state.end() ? std::string("nothing") : quote_untrusted(it->dump()));
  offset_ = it->get<double>();
}

std::chrono::seconds parse_max_time(const std::string& text, const std::string& what) {
  auto bad = [&] {
    fail("train",
         "{} must be DD:HH:MM:SS (days:hours:minutes:seconds, e.g. 00:12:00:00 for 12 hours; "
         "two digits each for hours below 24, minutes and seconds below 60), got {}",
         what, quote_untrusted(text));
  };
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == ':') {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  if (parts.size() != 4 || !all_digits(parts[0]) || parts[0].size() > 6) bad();
  for (size_t i = 1; i < 4; ++i)
    if (parts[i].size() != 2 || !all_digits(parts[i])) bad();
  const int64_t days = std::stoll(parts[0]);
  const int64_t hours = std::stoll(parts[1]);
  const int64_t minutes = std::stoll(parts[2]);
  const int64_t seconds = std::stoll(parts[3]);
  if (hours > 23 || minutes > 59 || seconds > 59) bad();
  return std::chrono::seconds(((days * 24 + hours) * 60 + minutes) * 60 + seconds);
}

std::string format_duration(double seconds) {
  const auto whole = static_cast<int64_t>(seconds);
  const int64_t days = whole / 86400;
  const int64_t rest = whole % 86400;
  const std::string clock =
      fmt::format("{}:{:02d}:{:02d}", rest / 3600, (rest / 60) % 60, rest % 60);
  if (days == 0) return clock;
  return fmt::format("{} day{}, {}", days, days == 1 ? "" : "s", clock);
}

}  // namespace mantissa::train
