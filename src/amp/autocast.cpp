// Autocast state (per thread; docs/autocast.md, "The region"), the region guard, and the
// casting rules ("Which tensors are cast", "Policies") that amp/autocast_dispatch.h applies at
// op entry.
#include "mantissa/amp/autocast.h"

#include "mantissa/core/managed_precision.h"

#include <cstdio>
#include <mutex>

#include "amp/autocast_dispatch.h"
#include "amp/cast_cache.h"
#include "mantissa/core/error.h"

namespace mantissa::amp {
namespace detail {
constinit thread_local bool t_cpu_enabled = false;
constinit thread_local std::vector<std::string>* t_policy_trace = nullptr;
}  // namespace detail

namespace {

// Everything but the CPU enabled flag, which lives alone so ops test one bool.
struct ThreadState {
  bool cuda_enabled = false;
  DType cpu_dtype = kBFloat16;  // PyTorch's CPU default
  DType cuda_dtype = kFloat16;  // PyTorch's CUDA default
  bool cache_enabled = true;
  int nesting = 0;
};
constinit thread_local ThreadState t_state;

bool cpu_supports(DType d) { return d == kBFloat16 || d == kFloat16; }

void check_cpu_dtype(DType d) {
  MANTISSA_CHECK(cpu_supports(d), "autocast",
                 "CPU autocast supports dtype bfloat16 and float16, got {}", d.name());
}

void warn_no_cuda_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::fputs(
        "mantissa: warning: autocast for device cuda requested, but mantissa has no CUDA "
        "backend; disabling autocast for that region\n",
        stderr);
  });
}

}  // namespace

// ---- state ----

bool is_autocast_enabled(DeviceType device) {
  return device == DeviceType::kCPU ? detail::t_cpu_enabled : t_state.cuda_enabled;
}

void set_autocast_enabled(DeviceType device, bool enabled) {
  if (device == DeviceType::kCPU) {
    detail::t_cpu_enabled = enabled;
  } else {
    t_state.cuda_enabled = enabled;
  }
}

DType get_autocast_dtype(DeviceType device) {
  return device == DeviceType::kCPU ? t_state.cpu_dtype : t_state.cuda_dtype;
}

void set_autocast_dtype(DeviceType device, DType dtype) {
  if (device == DeviceType::kCPU) {
    check_cpu_dtype(dtype);
    t_state.cpu_dtype = dtype;
  } else {
    MANTISSA_CHECK(dtype.is_floating_point() && !dtype.is_float8(), "autocast",
                   "expected a floating dtype (float64, float32, float16, bfloat16), got {}",
                   dtype.name());
    t_state.cuda_dtype = dtype;
  }
}

bool is_autocast_cache_enabled() { return t_state.cache_enabled; }
void set_autocast_cache_enabled(bool enabled) { t_state.cache_enabled = enabled; }
int autocast_nesting() { return t_state.nesting; }

// ---- the region ----

autocast::autocast(DeviceType device, std::optional<DType> dtype, bool enabled,
                   std::optional<bool> cache_enabled)
    : device_(device), enabled_(enabled), dtype_(dtype.value_or(get_autocast_dtype(device))) {
  if (device_ == DeviceType::kCUDA && enabled_) {
    warn_no_cuda_once();
    enabled_ = false;
  }
  if (device_ == DeviceType::kCPU && enabled_) check_cpu_dtype(dtype_);  // before any change
  if (enabled_ && managed_precision() != nullptr) {
    warn_if_cast_by_hand("autocast",
                         fmt::format("an autocast region ({}) was opened by hand", dtype_.name()));
  }
  prev_enabled_ = is_autocast_enabled(device_);
  prev_dtype_ = get_autocast_dtype(device_);
  prev_cache_enabled_ = t_state.cache_enabled;
  set_autocast_enabled(device_, enabled_);
  // A disabled region may name a dtype autocast cannot use (autocast(kCPU, kFloat32, false) is
  // how "AMP off" is often spelled); it is not stored, so nested regions do not inherit it.
  const bool storable = device_ == DeviceType::kCPU
                            ? cpu_supports(dtype_)
                            : dtype_.is_floating_point() && !dtype_.is_float8();
  if (storable) set_autocast_dtype(device_, dtype_);
  ++t_state.nesting;
  t_state.cache_enabled = cache_enabled.value_or(prev_cache_enabled_);
}

autocast::~autocast() {
  // Only the outermost exit clears: leaving a nested (even disabled) region keeps the copies.
  if (--t_state.nesting == 0) clear_autocast_cache();
  set_autocast_enabled(device_, prev_enabled_);
  if (device_ == DeviceType::kCPU) {
    t_state.cpu_dtype = prev_dtype_;
  } else {
    t_state.cuda_dtype = prev_dtype_;
  }
  t_state.cache_enabled = prev_cache_enabled_;
}

// ---- casting rules ----

namespace detail {

DType cast_target(std::string_view op, CastPolicy policy,
                  const std::vector<const Tensor*>& inputs) {
  const DType low = t_state.cpu_dtype;
  if (policy == CastPolicy::kLowerPrecision) return low;
  if (policy == CastPolicy::kFp32) return kFloat32;
  // Promote: start from the autocast dtype; any fp32 input makes it fp32. Ineligible inputs
  // (f64, fp8, integers, bool) take no part.
  DType target = low;
  for (const Tensor* t : inputs) {
    if (!t->defined() || !t->is_floating_point() || t->dtype() == kFloat64 ||
        t->dtype().is_float8())
      continue;
    if (t->dtype() == kFloat32) {
      target = kFloat32;
    } else if (t->dtype() != low) {
      fail("autocast",
           "{}: input of dtype {} under {} autocast; the promote policy only mixes float32 with "
           "the autocast dtype (PyTorch: \"Unexpected floating ScalarType in "
           "at::autocast::prioritize\"); cast it with .to() first",
           op, t->dtype().name(), low.name());
    }
  }
  return target;
}

Tensor cast_tensor(const Tensor& t, DType target) {
  const bool eligible = t.defined() && t.is_floating_point() && t.dtype() != kFloat64 &&
                        !t.dtype().is_float8() && t.device().type == DeviceType::kCPU;
  if (!eligible || t.dtype() == target) return t;
  if (cacheable(t, target)) return cached_cast(t, target);
  InternalCastScope internal;  // autocast's own argument cast, not one by hand
  return t.to(target);
}

}  // namespace detail
}  // namespace mantissa::amp
