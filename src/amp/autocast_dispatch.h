#pragma once
// How an op applies autocast. Its first statement is
//
//   MANTISSA_AUTOCAST("matmul", matmul, a, b);
//
// With autocast off that is one thread-local bool test. With it on, the op's row in the policy
// table (amp/policy.h) decides a target dtype, the eligible tensor arguments are cast with
// Tensor::to (graph nodes; fp32 weights through the cast cache), and the op is called again
// with the cast arguments while autocast is suspended, so the ops it calls internally are not
// autocast a second time (PyTorch excludes its Autocast dispatch key the same way). Ops called
// from backward functions are never cast (autograd::in_backward()).
#include <string>
#include <string_view>
#include <vector>

#include "amp/policy.h"
#include "core/autograd/backward_state.h"
#include "mantissa/core/tensor.h"

namespace mantissa::amp::detail {

// CPU / CUDA autocast on for this thread and not suspended by a running op (defined in
// autocast.cpp).
extern constinit thread_local bool t_cpu_enabled;
extern constinit thread_local bool t_cuda_enabled;
inline bool cpu_autocast_active() { return t_cpu_enabled; }
inline bool any_autocast_active() { return t_cpu_enabled || t_cuda_enabled; }

// Tests set this to record which op names reach the table (nullptr: no recording).
extern constinit thread_local std::vector<std::string>* t_policy_trace;

// Turns CPU and CUDA autocast off for a scope and back to what they were.
class SuspendAutocast {
 public:
  SuspendAutocast() : prev_cpu_(t_cpu_enabled), prev_cuda_(t_cuda_enabled) {
    t_cpu_enabled = false;
    t_cuda_enabled = false;
  }
  ~SuspendAutocast() {
    t_cpu_enabled = prev_cpu_;
    t_cuda_enabled = prev_cuda_;
  }
  SuspendAutocast(const SuspendAutocast&) = delete;
  SuspendAutocast& operator=(const SuspendAutocast&) = delete;

 private:
  bool prev_cpu_, prev_cuda_;
};

// The dtype eligible tensors go to under `policy` (kLowerPrecision, kFp32 or kPromote), with
// `device`'s autocast dtype. Promote: the widest of the autocast dtype and the eligible inputs;
// throws, as PyTorch does, for a low-precision input that is not the autocast dtype (bf16
// under fp16 autocast).
DType cast_target(std::string_view op, CastPolicy policy, const std::vector<const Tensor*>& inputs,
                  DeviceType device);

// Which autocast applies to an op: CUDA when any tensor input is on a GPU, else CPU (as in
// PyTorch, where the dispatch key follows the inputs' device).
DeviceType autocast_device_of(const std::vector<const Tensor*>& inputs);

// `t` cast to `target` when autocast may cast it: a defined fp32/fp16/bf16 tensor on the
// autocast device type (never f64, fp8, integer or bool). Through the weight cache when the
// cast qualifies (docs/autocast.md, "The weight-cast cache").
Tensor cast_tensor(const Tensor& t, DType target, DeviceType device);

inline void collect(std::vector<const Tensor*>& out, const Tensor& t) { out.push_back(&t); }
inline void collect(std::vector<const Tensor*>& out, const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) out.push_back(&t);
}
template <typename T>
void collect(std::vector<const Tensor*>&, const T&) {}  // non-tensor arguments

inline Tensor cast_arg(const Tensor& t, DType target, DeviceType device) {
  return cast_tensor(t, target, device);
}
inline std::vector<Tensor> cast_arg(const std::vector<Tensor>& ts, DType target,
                                    DeviceType device) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(cast_tensor(t, target, device));
  return out;
}
template <typename T>
const T& cast_arg(const T& x, DType, DeviceType) {
  return x;
}

// Applies op's policy to args and calls fn with the result, autocast suspended meanwhile.
// The policy table is shared by both devices (src/amp/policy.cpp); the device whose autocast
// applies follows the inputs, and an op whose device has autocast off runs as called.
template <typename Fn, typename... Args>
auto redispatch(std::string_view op, Fn&& fn, const Args&... args) {
  std::vector<const Tensor*> inputs;
  (collect(inputs, args), ...);
  const DeviceType device = autocast_device_of(inputs);
  const bool enabled = device == DeviceType::kCPU ? t_cpu_enabled : t_cuda_enabled;
  SuspendAutocast suspend;
  if (!enabled || autograd::in_backward()) return fn(args...);
  const CastPolicy policy = policy_for(op);
  if (t_policy_trace != nullptr) t_policy_trace->emplace_back(op);
  if (policy == CastPolicy::kUnlisted) return fn(args...);
  const DType target = cast_target(op, policy, inputs, device);
  return fn(cast_arg(args, target, device)...);
}

}  // namespace mantissa::amp::detail

// First statement of an op: `fn` is the op itself (overloads resolve on the cast arguments),
// the remaining arguments are the op's parameters in order.
#define MANTISSA_AUTOCAST(op_name, fn, ...)                                              \
  do {                                                                                   \
    if (::mantissa::amp::detail::any_autocast_active()) [[unlikely]]                     \
      return ::mantissa::amp::detail::redispatch(                                        \
          op_name, [&](const auto&... autocast_args_) { return fn(autocast_args_...); }, \
          __VA_ARGS__);                                                                  \
  } while (0)
