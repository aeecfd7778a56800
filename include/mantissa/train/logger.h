#pragma once
// Logger: where the Trainer sends logged metrics (CSV, TensorBoard, ...). The Trainer calls
// log_metrics every log_every_n_steps optimizer steps with the on_step metrics and at the end of
// each epoch with the epoch means, tagged with the global step.
#include <cstdint>
#include <map>
#include <string>

namespace mantissa::train {

class Logger {
 public:
  virtual ~Logger() = default;
  virtual std::string name() const = 0;
  virtual void log_metrics(const std::map<std::string, double>& metrics, int64_t step) = 0;
  // Flushes and closes files at the end of fit/validate/test.
  virtual void finalize() {}
};

}  // namespace mantissa::train
