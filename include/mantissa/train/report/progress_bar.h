#pragma once
// A training progress bar: "Epoch 1/2 [=====>    ] 120/235 00:04<00:05 loss (epoch mean) 0.4123
// 1234 samples/s val_acc 0.85". "loss (epoch mean)" is the running mean of the epoch's step
// losses (finite ones), not the last step's, which jumps from batch to batch; labelled so, as a
// language model's validation lines show another mean (that of the steps since the last one).
// samples/s and the ETA count training time only: time between pause() and resume() (validation
// passes) is left out, so the rate agrees with the epoch line of `mantissa train`. On a terminal it
// redraws one line with '\r' (at most every refresh_seconds); elsewhere (CI logs, pipes) it
// prints a plain line every plain_seconds and at the end of each epoch, so logs stay short.
// Output stream, clock and terminal flag are injectable for tests.
#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <string>

namespace mantissa::train {

struct ProgressBarOptions {
  bool is_tty = false;
  double refresh_seconds = 0.1;  // terminal redraw limit
  double plain_seconds = 10.0;   // interval of plain lines when not a terminal
  int bar_width = 20;
};

class ProgressBar {
 public:
  using Clock = std::function<double()>;  // monotonic seconds

  ProgressBar(std::ostream& out, ProgressBarOptions options, Clock clock = steady_clock_seconds);
  // Writes to stdout, as a terminal bar when stdout is a TTY (isatty).
  static ProgressBar for_stdout();
  static double steady_clock_seconds();

  // total_steps < 0: unknown length (no bar, no ETA). samples/s is the whole job's: each of
  // `ranks` data-parallel ranks trains a batch of the size update() is given (ranks 1: one
  // process).
  void start_epoch(int64_t epoch, int64_t max_epochs, int64_t total_steps, int64_t ranks = 1);
  // After a step: `step` steps of this epoch are done, `batch_size` samples were in the last
  // one. metrics holds "loss" (this step's; the bar shows the epoch's running mean, each step
  // weighted by its samples as the epoch line's mean is) and any
  // extra prog_bar values; shown in that order.
  void update(int64_t step, int64_t batch_size, const std::map<std::string, double>& metrics);
  // Time between pause() and resume() (e.g. a validation pass) is not training time: it is
  // left out of samples/s and the ETA (the elapsed clock still shows wall time).
  void pause();
  void resume();
  // Forces the final line of the epoch (with e.g. validation metrics) and ends it.
  void end_epoch(const std::map<std::string, double>& metrics = {});

  // The line for the current state, without '\r' or newline (public for tests).
  std::string render() const;

 private:
  void draw(bool final);

  std::ostream& out_;
  ProgressBarOptions opt_;
  Clock clock_;
  int64_t epoch_ = 0, max_epochs_ = 0, total_ = -1, step_ = 0, samples_ = 0, ranks_ = 1;
  double epoch_start_ = 0, last_draw_ = -1e300;
  double paused_seconds_ = 0, pause_start_ = -1;  // pause_start_ < 0: not paused
  double loss_sum_ = 0;                           // finite step losses times their samples
  int64_t loss_count_ = 0;                        // the samples behind loss_sum_
  size_t last_width_ = 0;
  std::map<std::string, double> metrics_;
  bool open_line_ = false;  // a '\r' line is on screen without its newline
};

}  // namespace mantissa::train
