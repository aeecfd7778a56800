// Autocast state (per thread; docs/autocast.md, "The region"), the region guard, and the
// casting rules ("Which tensors are cast", "Policies") that amp/autocast_dispatch.h applies at
// op entry.
#include "mantissa/amp/autocast.h"

#include "mantissa/core/managed_precision.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <optional>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "amp/cast_cache.h"
#include "mantissa/core/cuda.h"
#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"

namespace mantissa::amp {
namespace detail {
constinit thread_local bool t_cpu_enabled = false;
constinit thread_local bool t_cuda_enabled = false;
constinit thread_local std::vector<std::string>* t_policy_trace = nullptr;
}  // namespace detail

namespace {

// Everything but the enabled flags, which live alone so ops test two bools.
struct ThreadState {
  DType cpu_dtype = kBFloat16;  // PyTorch's CPU default
  DType cuda_dtype = kFloat16;  // PyTorch's CUDA default
  bool cache_enabled = true;
  int nesting = 0;
};
constinit thread_local ThreadState t_state;
// The regions open on this thread, innermost last: a region closed before one opened inside it
// (regions held by unique_ptr or optional and reset in the wrong order) is found here.
thread_local std::vector<autocast*> t_regions;

bool cpu_supports(DType d) { return d == kBFloat16 || d == kFloat16; }

void check_cpu_dtype(DType d) {
  MANTISSA_CHECK(cpu_supports(d), "autocast",
                 "CPU autocast supports dtype bfloat16 and float16, got {}", d.name());
}

// CUDA autocast lowers to float16 (the default) or bfloat16, where the GPU has bf16
// arithmetic (compute capability 8.0+), as torch.autocast("cuda") accepts them.
void check_cuda_dtype(DType d) {
  MANTISSA_CHECK(d == kFloat16 || (d == kBFloat16 && cuda::is_bf16_supported()), "autocast",
                 "CUDA autocast supports dtype float16{}, got {}",
                 cuda::is_bf16_supported() ? " and bfloat16"
                                           : " (bfloat16 needs a GPU of compute "
                                             "capability 8.0 or newer)",
                 d.name());
}

void warn_no_cuda_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::fprintf(stderr,
                 "mantissa: warning: autocast for device cuda requested, but no GPU can be used "
                 "(%s); disabling autocast for that region\n",
                 cuda::unavailable_reason().c_str());
  });
}

}  // namespace

// ---- state ----

bool is_autocast_enabled(DeviceType device) {
  return device == DeviceType::kCPU ? detail::t_cpu_enabled : detail::t_cuda_enabled;
}

void set_autocast_enabled(DeviceType device, bool enabled) {
  if (device == DeviceType::kCPU) {
    detail::t_cpu_enabled = enabled;
  } else {
    detail::t_cuda_enabled = enabled;
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
  if (device_ == DeviceType::kCUDA && enabled_ && !cuda::is_available()) {
    warn_no_cuda_once();
    enabled_ = false;
  }
  // Checked before any change.
  if (device_ == DeviceType::kCPU && enabled_) check_cpu_dtype(dtype_);
  if (device_ == DeviceType::kCUDA && enabled_) check_cuda_dtype(dtype_);
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
  const bool storable = cpu_supports(dtype_);  // float16 or bfloat16, for either device
  if (storable) set_autocast_dtype(device_, dtype_);
  ++t_state.nesting;
  t_state.cache_enabled = cache_enabled.value_or(prev_cache_enabled_);
  t_regions.push_back(this);
}

autocast::~autocast() {
  const auto it = std::find(t_regions.begin(), t_regions.end(), this);
  if (it == t_regions.end()) {
    // Closed on another thread than it was opened on: that thread's state is out of reach.
    warn_once(
        "an autocast region was closed on another thread than the one that opened it; that "
        "thread's autocast state was not restored (open and close each region on one thread)");
    return;
  }
  if (it + 1 != t_regions.end()) {
    // Regions opened inside this one are still open. Restoring this region's saved state now
    // would be undone when they close (the innermost restores what this one set, so autocast
    // stayed on after every region had closed). Instead, the state before this region is handed
    // to the regions above, which restore it when they close, as closing in order would have.
    warn_once(
        "autocast regions were closed out of order (a region closed while a region opened "
        "inside it was still open); the autocast state is restored as if they had closed in "
        "order, innermost first");
    (*(it + 1))->prev_cache_enabled_ = prev_cache_enabled_;
    const auto same_device = std::find_if(it + 1, t_regions.end(),
                                          [&](const autocast* r) { return r->device_ == device_; });
    if (same_device != t_regions.end()) {
      (*same_device)->prev_enabled_ = prev_enabled_;
      (*same_device)->prev_dtype_ = prev_dtype_;
    } else {
      // No region above sets this device's state: restore it now.
      set_autocast_enabled(device_, prev_enabled_);
      (device_ == DeviceType::kCPU ? t_state.cpu_dtype : t_state.cuda_dtype) = prev_dtype_;
    }
    t_regions.erase(it);
    --t_state.nesting;  // regions remain open: the cache stays
    return;
  }
  t_regions.pop_back();
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

DType cast_target(std::string_view op, CastPolicy policy, const std::vector<const Tensor*>& inputs,
                  DeviceType device) {
  const DType low = get_autocast_dtype(device);
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

DeviceType autocast_device_of(const std::vector<const Tensor*>& inputs) {
  for (const Tensor* t : inputs)
    if (t->defined() && t->is_cuda()) return DeviceType::kCUDA;
  return DeviceType::kCPU;
}

namespace {
// The order of t's dims from the largest stride to the smallest when t in that order is
// contiguous (t is a transpose or permutation of a contiguous tensor), else nothing.
std::optional<std::vector<int64_t>> contiguous_order(const Tensor& t) {
  std::vector<int64_t> order(static_cast<size_t>(t.dim()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return t.strides()[static_cast<size_t>(a)] > t.strides()[static_cast<size_t>(b)];
  });
  if (!t.permute(order).is_contiguous()) return std::nullopt;
  return order;
}
}  // namespace

Tensor cast_tensor(const Tensor& t, DType target, DeviceType device) {
  // Only tensors of the autocast device: CUDA autocast leaves CPU tensors alone and the reverse.
  const bool eligible = t.defined() && t.is_floating_point() && t.dtype() != kFloat64 &&
                        !t.dtype().is_float8() && t.device().type == device;
  if (!eligible || t.dtype() == target) return t;
  if (cacheable(t, target)) return cached_cast(t, target);
  InternalCastScope internal;  // autocast's own argument cast, not one by hand
  // A transposed (or permuted) contiguous tensor, such as a tied head's weight.t(), is cast in
  // its storage order and permuted back, as PyTorch's preserve_format keeps strides: a strided
  // copy of a 50257 x 768 transposed weight before its cast cost 15 % of a QLoRA step.
  if (!t.is_contiguous() && !t.is_cuda()) {
    if (const std::optional<std::vector<int64_t>> order = contiguous_order(t)) {
      std::vector<int64_t> back(order->size());
      for (size_t i = 0; i < order->size(); ++i)
        back[static_cast<size_t>((*order)[i])] = static_cast<int64_t>(i);
      return t.permute(*order).to(target).permute(back);
    }
  }
  return t.to(target);
}

}  // namespace detail
}  // namespace mantissa::amp
