#pragma once
// Anomaly detection (torch.autograd.detect_anomaly / set_detect_anomaly, and Lightning's
// Trainer(detect_anomaly=True)): while it is on, the first op whose forward output or whose
// backward gradient holds a NaN or an infinity stops the run with a mantissa::Error that
// names the op, the shapes and dtypes of its inputs and the model layer it belongs to,
// instead of a loss that silently becomes NaN later. Off by default; off, every recorded op
// pays one relaxed atomic load. See docs/anomaly.md.
//
//   autograd::detect_anomaly guard(model.named_parameters());  // names layers in reports
//   Tensor loss = loss_fn(model.forward(x), y);                // throws at the first NaN/inf op
//   loss.backward();                                           // throws at the first NaN/inf grad
#include <string>
#include <utility>
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa::autograd {

// What anomaly detection throws: a mantissa::Error whose message starts "[detect_anomaly] ".
// A type of its own so that the Trainer can report it as the run diverging (exit status 4 and
// the metrics JSON in `mantissa train`), which is what a non-finite value in a training step
// means, rather than as a mistake in the input.
class AnomalyDetected : public Error {
 public:
  using Error::Error;
};

// Process-wide switch (as PyTorch's anomaly mode).
bool is_anomaly_enabled();
void set_detect_anomaly(bool enabled);

// (qualified parameter name, parameter), as nn::Module::named_parameters() lists them.
using AnomalyNamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Labels parameters with their qualified names ("blocks0.attn.qkv.weight"): an op that uses
// one, directly or through an autocast copy, is reported in that layer ("blocks0.attn.qkv");
// other ops are reported in the layer of their most recent input. Replaces earlier labels.
void set_anomaly_parameter_names(const AnomalyNamedTensors& named);
void clear_anomaly_parameter_names();

// The NaN and infinities `t` holds, counted as the anomaly reports count them ("3 NaN, 2 +inf
// of 784 elements"); "" when it holds none or is not floating-point. For checks outside the
// graph (the Trainer's check of an optimizer step's result).
std::string non_finite_summary(const Tensor& t);

// RAII: anomaly detection on for the scope (and parameters labelled, when given); the
// previous switch and labels come back on exit.
class detect_anomaly {
 public:
  detect_anomaly();
  explicit detect_anomaly(const AnomalyNamedTensors& named_parameters);
  ~detect_anomaly();
  detect_anomaly(const detect_anomaly&) = delete;
  detect_anomaly& operator=(const detect_anomaly&) = delete;

 private:
  bool previous_;
  bool relabelled_;
};

// RAII, this thread: backward anomalies are remembered instead of thrown. A loss scaler's
// backward (16-mixed) expects inf gradients when the scale is too large and skips that
// step; the first report says where the overflow started.
class TolerateBackwardAnomalies {
 public:
  TolerateBackwardAnomalies();
  ~TolerateBackwardAnomalies();
  TolerateBackwardAnomalies(const TolerateBackwardAnomalies&) = delete;
  TolerateBackwardAnomalies& operator=(const TolerateBackwardAnomalies&) = delete;
  // The first backward anomaly seen in the scope ("" when none).
  const std::string& first_report() const { return first_; }

 private:
  friend void note_backward_anomaly(const std::string& report);
  TolerateBackwardAnomalies* previous_;
  std::string first_;
};

// Internal, called by the engine: throws `report`, or notes it when tolerated.
void note_backward_anomaly(const std::string& report);

}  // namespace mantissa::autograd
