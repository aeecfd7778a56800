#pragma once
// Profilers for the Trainer (Lightning's `profiler="simple"`): where the time of a fit goes,
// per Trainer action ("run_training_batch", "backward", "optimizer_step", "get_train_batch"),
// per hook ("[Callback]ModelCheckpoint.on_train_epoch_end", "[TrainModule]on_after_backward")
// and per op family ("forward matmul", "backward LinearBackward", from
// core/op_profiler.h). The Trainer calls start/stop around each action and prints summary()
// when fit ends (or writes it to a file: SimpleProfilerOptions::filename).
//
//   train::TrainerOptions o;
//   o.profiler = train::make_profiler("simple");
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mantissa/core/op_profiler.h"

namespace mantissa::train {

class Profiler {
 public:
  virtual ~Profiler() = default;
  // The fit (or validate/test) begins and ends: op timing switches on and off here.
  virtual void setup() {}
  virtual void teardown() {}
  virtual void start(const std::string& action) = 0;
  virtual void stop(const std::string& action) = 0;
  // A report of everything recorded so far.
  virtual std::string summary() const = 0;
  // Writes summary() where the profiler was told to (stdout by default).
  virtual void describe() const;
};

struct ActionTime {
  std::string action;
  int64_t calls = 0;
  double total_seconds = 0;
};

struct SimpleProfilerOptions {
  // Empty: the report goes to stdout. Else it is written to dirpath/filename (dirpath empty:
  // the current directory), overwriting it.
  std::string dirpath;
  std::string filename;
  // Also time the ops by family (forward and backward).
  bool op_families = true;
};

// Wall time per action: calls, mean, total and the share of the profiled run, sorted by total
// time. Nested actions are reported each with their own inclusive time (so the shares of
// "run_training_batch" and its "backward" overlap, as in Lightning's report).
class SimpleProfiler : public Profiler {
 public:
  explicit SimpleProfiler(SimpleProfilerOptions options = {});
  void setup() override;
  void teardown() override;
  void start(const std::string& action) override;
  void stop(const std::string& action) override;
  std::string summary() const override;
  void describe() const override;

  // The recorded actions (hooks and Trainer actions), sorted by total time, longest first.
  std::vector<ActionTime> actions() const;
  // The op families recorded between setup and teardown.
  const profiling::OpTimes& op_times() const { return op_times_; }
  // Wall time between the first setup and the last teardown.
  double profiled_seconds() const { return profiled_seconds_; }

 private:
  using Clock = std::chrono::steady_clock;
  SimpleProfilerOptions options_;
  std::map<std::string, Clock::time_point> open_;
  std::map<std::string, ActionTime> recorded_;
  profiling::OpTimes op_times_;
  Clock::time_point setup_time_;
  double profiled_seconds_ = 0;
  int depth_ = 0;  // nested setup/teardown pairs (fit then validate)
};

// "simple" -> SimpleProfiler; "" -> nullptr (no profiling); anything else throws listing the
// valid names.
std::shared_ptr<Profiler> make_profiler(const std::string& name);

// Times a block as one action of `profiler` (nothing when it is null).
class ProfileScope {
 public:
  ProfileScope(Profiler* profiler, std::string action)
      : profiler_(profiler), action_(profiler ? std::move(action) : std::string()) {
    if (profiler_) profiler_->start(action_);
  }
  ~ProfileScope() {
    if (profiler_) profiler_->stop(action_);
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  Profiler* profiler_;
  std::string action_;
};

}  // namespace mantissa::train
