#pragma once
// The engine's and record()'s side of anomaly detection (mantissa/autograd/anomaly_mode.h).
#include <atomic>
#include <vector>

#include "mantissa/autograd/anomaly_mode.h"
#include "mantissa/autograd/node.h"

namespace mantissa::autograd::detail {

extern std::atomic<bool> g_anomaly_enabled;
inline bool anomaly_enabled() { return g_anomaly_enabled.load(std::memory_order_relaxed); }

// record(): gives `node` its layer and sequence, then throws when `output` holds a NaN or an
// infinity this op produced (docs/anomaly.md says which count).
void check_forward(Node& node, const Tensor& output, const std::vector<Tensor>& inputs);

// Gives `copy` (a dtype cast of `source`: autocast's cached copy of a weight, or Tensor::to) the
// layer label of `source` when source is a labelled parameter, so ops that take the copy are
// attributed to the parameter's layer. No-op unless anomaly detection is on.
void inherit_parameter_label(const Tensor& copy, const Tensor& source);

// autocast's cast cache: throws when `copy` (a narrower copy of `source`) holds a NaN or an
// infinity that `source` does not (a parameter beyond the target dtype's range). The cast is
// not a recorded op, so without this the first op to take the copy could not say who made it.
void check_cast_copy(const Tensor& copy, const Tensor& source);

// run_backward(): throws (or notes, under TolerateBackwardAnomalies) when a gradient `node`
// returned holds a NaN or an infinity.
void check_backward(const Node& node, const std::vector<Tensor>& grads);

}  // namespace mantissa::autograd::detail
