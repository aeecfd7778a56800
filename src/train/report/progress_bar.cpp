// Progress bar rendering and rate limiting.
#include "mantissa/train/report/progress_bar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>

#include "mantissa/core/terminal.h"

namespace mantissa::train {
namespace {

std::string clock_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{:02}:{:02}", s / 60, s % 60);
}

// 4 significant digits reads well for losses, accuracies and learning rates alike.
std::string value_text(double v) { return fmt::format("{:.4g}", v); }

}  // namespace

double ProgressBar::steady_clock_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

ProgressBar::ProgressBar(std::ostream& out, ProgressBarOptions options, Clock clock)
    : out_(out), opt_(options), clock_(std::move(clock)) {}

ProgressBar ProgressBar::for_stdout() {
  return ProgressBar(std::cout, ProgressBarOptions{.is_tty = stdout_is_terminal()});
}

void ProgressBar::start_epoch(int64_t epoch, int64_t max_epochs, int64_t total_steps,
                              int64_t ranks) {
  if (open_line_) end_epoch();
  epoch_ = epoch;
  max_epochs_ = max_epochs;
  total_ = total_steps;
  ranks_ = std::max<int64_t>(1, ranks);
  step_ = samples_ = loss_count_ = 0;
  loss_sum_ = paused_seconds_ = 0;
  pause_start_ = -1;
  metrics_.clear();
  epoch_start_ = clock_();
  last_draw_ = epoch_start_;  // the first plain line comes after plain_seconds, not at step 1
}

void ProgressBar::pause() {
  if (pause_start_ < 0) pause_start_ = clock_();
}

void ProgressBar::resume() {
  if (pause_start_ < 0) return;
  paused_seconds_ += clock_() - pause_start_;
  pause_start_ = -1;
}

std::string ProgressBar::render() const {
  const double now = clock_();
  const double elapsed = now - epoch_start_;
  // Training time only: finished pauses and a pause still running are left out.
  const double paused = paused_seconds_ + (pause_start_ >= 0 ? now - pause_start_ : 0.0);
  const double training = elapsed - paused;
  std::string s = max_epochs_ > 0 ? fmt::format("Epoch {}/{}", epoch_ + 1, max_epochs_)
                                  : fmt::format("Epoch {}", epoch_ + 1);
  if (total_ > 0) {
    const double frac = std::min(1.0, static_cast<double>(step_) / static_cast<double>(total_));
    const int filled = static_cast<int>(frac * opt_.bar_width);
    std::string bar(static_cast<size_t>(filled), '=');
    if (filled < opt_.bar_width) bar += step_ > 0 ? ">" : " ";
    bar.resize(static_cast<size_t>(opt_.bar_width), ' ');
    const double eta =
        step_ > 0 ? training / static_cast<double>(step_) * static_cast<double>(total_ - step_)
                  : NAN;
    s += fmt::format(" [{}] {}/{} {}<{}", bar, step_, total_, clock_text(elapsed), clock_text(eta));
  } else {
    s += fmt::format(" {} {}", step_, clock_text(elapsed));
  }
  if (loss_count_ > 0)
    s += " loss (epoch mean) " + value_text(loss_sum_ / static_cast<double>(loss_count_));
  if (training > 0 && samples_ > 0)
    s += fmt::format(" {:.0f} samples/s", static_cast<double>(samples_) / training);
  for (const auto& [k, v] : metrics_)
    if (k != "loss") s += " " + k + " " + value_text(v);
  return s;
}

void ProgressBar::draw(bool final) {
  const std::string line = render();
  if (opt_.is_tty) {
    // Pad with spaces so a shorter line fully covers the previous one.
    const size_t pad = last_width_ > line.size() ? last_width_ - line.size() : 0;
    out_ << '\r' << line << std::string(pad, ' ');
    last_width_ = line.size();
    open_line_ = !final;
    if (final) {
      out_ << '\n';
      last_width_ = 0;
    }
  } else {
    out_ << line << '\n';
  }
  out_.flush();
  last_draw_ = clock_();
}

void ProgressBar::update(int64_t step, int64_t batch_size,
                         const std::map<std::string, double>& metrics) {
  step_ = step;
  samples_ += batch_size * ranks_;  // the job's samples: every rank trained such a batch
  for (const auto& [k, v] : metrics) {
    if (k != "loss") {
      metrics_[k] = v;
    } else if (std::isfinite(v)) {  // a step a loss scaler skipped has an inf/NaN loss
      // Weighted by the step's samples, as the epoch line's mean is: a short last batch
      // counts for what it holds (a step of unknown size counts once).
      const int64_t weight = batch_size > 0 ? batch_size : 1;
      loss_sum_ += v * static_cast<double>(weight);
      loss_count_ += weight;
    }
  }
  const double now = clock_();
  const double interval = opt_.is_tty ? opt_.refresh_seconds : opt_.plain_seconds;
  if (now - last_draw_ >= interval) draw(/*final=*/false);
  open_line_ = opt_.is_tty;  // even without a redraw, the epoch's line is still open
}

void ProgressBar::end_epoch(const std::map<std::string, double>& metrics) {
  for (const auto& [k, v] : metrics)
    if (k != "loss") metrics_[k] = v;
  draw(/*final=*/true);
  open_line_ = false;
}

}  // namespace mantissa::train
