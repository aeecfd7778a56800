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

// run_backward(): throws (or notes, under TolerateBackwardAnomalies) when a gradient `node`
// returned holds a NaN or an infinity.
void check_backward(const Node& node, const std::vector<Tensor>& grads);

}  // namespace mantissa::autograd::detail
