// CPU kernels of the two GradScaler device ops. The unscale loop works in blocks of
// kernels::kBlock elements: fp16/bf16 runs are widened with the bulk SIMD conversions, the
// check-and-multiply body runs over plain arrays (so it vectorises), and narrow results are
// rounded back once. Large contiguous grads are split across OpenMP threads in fixed chunks;
// the only cross-thread result is an OR of flags, which does not depend on the partition.
#include "kernels/cpu/amp/unscale_kernel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/inplace.h"  // update_scale_ writes back with copy_unchecked on every build
#include "kernels/cpu/elementwise/elementwise_loops.h"
#include "mantissa/core/cuda.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "kernels/cuda/amp/unscale_kernels.h"
#endif

namespace mantissa::amp {
namespace {

using kernels::acc_t;
using kernels::kBlock;

constexpr const char* kUnscaleWhere = "_amp_foreach_non_finite_check_and_unscale_";
constexpr const char* kUpdateWhere = "_amp_update_scale_";
// Elements per parallel work item (a multiple of kBlock).
constexpr int64_t kChunk = 64 * kBlock;

// !isfinite(v) written so that it vectorises: NaN fails every comparison, +-inf exceeds max.
template <typename A>
inline int not_finite(A v) {
  return !(std::abs(v) <= std::numeric_limits<A>::max());
}

// Checks and unscales the n elements p[0], p[stride], ... in place; returns 1 when any of them
// was non-finite (before the multiplication, as PyTorch checks the incoming value).
template <typename T>
int unscale_run(T* p, int64_t stride, int64_t n, acc_t<T> inv, bool multiply) {
  using A = acc_t<T>;
  alignas(64) A buf[kBlock];
  int bad = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    T* q = p + b * stride;
    const A* v = kernels::load_block(q, stride, m, buf);
    int flag = 0;
    if (!multiply) {
      // inv_scale == 1 writes v back unchanged: only the check has an effect.
#pragma omp simd reduction(| : flag)
      for (int64_t i = 0; i < m; ++i) flag |= not_finite(v[i]);
      bad |= flag;
      continue;
    }
    A* w = buf;
    bool in_place = false;
    if constexpr (std::is_same_v<T, A>) {
      in_place = stride == 1;  // already contiguous in its arithmetic type
      if (in_place) w = q;
    }
#pragma omp simd reduction(| : flag)
    for (int64_t i = 0; i < m; ++i) {
      const A x = v[i];
      flag |= not_finite(x);
      w[i] = x * inv;  // inf stays inf, NaN stays NaN
    }
    bad |= flag;
    if (in_place) continue;
    if constexpr (kernels::kIsNarrowFloat<T>) {
      if (stride == 1) {
        kernels::store_narrow(buf, q, m);
        continue;
      }
    }
    for (int64_t i = 0; i < m; ++i) q[i * stride] = kernels::store<T>(buf[i]);
  }
  return bad;
}

template <typename T>
bool unscale_tensor(const Tensor& g, acc_t<T> inv, bool multiply) {
  const int64_t n = g.numel();
  if (n == 0) return false;
  T* base = static_cast<T*>(g.data_ptr());
  if (g.is_contiguous()) {
    if (n <= kernels::kParallelGrain) return unscale_run(base, 1, n, inv, multiply) != 0;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kChunk;
      bad |= unscale_run(base + begin, 1, std::min(kChunk, n - begin), inv, multiply);
    }
    return bad != 0;
  }
  // Strided grads (a user-set view): one innermost row at a time. Rows may run on several
  // threads, so the flag is an atomic that is only ever raised.
  std::atomic<bool> bad{false};
  const Shape& strides = g.strides();
  const int64_t inner_stride = strides.empty() ? 1 : strides.back();
  kernels::for_each_row<1>(g.shape(), {&strides},
                           [&](const std::array<int64_t, 1>& off, int64_t count) {
                             if (unscale_run(base + off[0], inner_stride, count, inv, multiply))
                               bad.store(true, std::memory_order_relaxed);
                           });
  return bad.load();
}

void check_state_scalar(const Tensor& t, DType dtype, const char* what, const char* where) {
  MANTISSA_CHECK(t.defined(), where, "{} is an undefined tensor", what);
  MANTISSA_CHECK(t.numel() == 1 && t.dtype() == dtype, where,
                 "{} must be a 1-element {} tensor, got shape {} and dtype {}", what, dtype.name(),
                 shape_str(t.shape()), t.dtype().name());
}

// GPU grads: one pass over all of them in a few multi-tensor launches, reading inv_scale and
// raising found_inf on the device; nothing is read back here.
void unscale_on_gpu(const std::vector<Tensor>& grads, const Tensor& found_inf,
                    const Tensor& inv_scale) {
#if MANTISSA_HAS_CUDA
  cuda::detail::DeviceGuard guard(found_inf.device());
  // Strided grads (a user-set view) go through a contiguous copy written back afterwards.
  std::vector<Tensor> work;
  std::vector<void*> ptrs;
  std::vector<int64_t> sizes;
  work.reserve(grads.size());
  for (const Tensor& g : grads) {
    work.push_back(g.is_contiguous() ? g : g.detach().contiguous());
    ptrs.push_back(work.back().device_ptr());
    sizes.push_back(work.back().numel());
  }
  const bool ok = cuda::detail::launch_non_finite_check_and_unscale_multi(
      ptrs.data(), sizes.data(), static_cast<int64_t>(ptrs.size()),
      mantissa::detail::cuda_scalar_of(grads[0].dtype(), kUnscaleWhere),
      found_inf.device_data<float>(), inv_scale.device_data<float>());
  MANTISSA_CHECK(ok, kUnscaleWhere, "no GPU kernel for {} grads", grads[0].dtype().name());
  for (size_t i = 0; i < grads.size(); ++i)
    if (!work[i].is_same(grads[i])) mantissa::detail::copy_unchecked(Tensor(grads[i]), work[i]);
#else
  fail(kUnscaleWhere, "{}", cuda::unavailable_reason());
#endif
}

}  // namespace

void foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& grads,
                                           const Tensor& found_inf, const Tensor& inv_scale) {
  check_state_scalar(found_inf, kFloat32, "found_inf", kUnscaleWhere);
  check_state_scalar(inv_scale, kFloat32, "inv_scale", kUnscaleWhere);
  if (grads.empty()) return;
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    MANTISSA_CHECK(g.defined(), kUnscaleWhere, "grad {} is an undefined tensor", i);
    MANTISSA_CHECK(g.dtype() == grads[0].dtype(), kUnscaleWhere,
                   "all grads must share one dtype: grad 0 is {}, grad {} is {}",
                   grads[0].dtype().name(), i, g.dtype().name());
    MANTISSA_CHECK(g.device() == found_inf.device() && g.device() == inv_scale.device(),
                   kUnscaleWhere, "grad {} is on {}, found_inf on {} and inv_scale on {}", i,
                   g.device().str(), found_inf.device().str(), inv_scale.device().str());
    // Writing through a broadcast (stride 0) dimension would multiply one element many times.
    for (int64_t d = 0; d < g.dim(); ++d)
      MANTISSA_CHECK(g.stride(d) != 0 || g.size(d) <= 1, kUnscaleWhere,
                     "grad {} (shape {}) has overlapping memory (stride 0 in dim {}); unscaling "
                     "it in place is not supported",
                     i, shape_str(g.shape()), d);
  }
  if (found_inf.is_cuda()) return unscale_on_gpu(grads, found_inf, inv_scale);
  const float inv = *static_cast<const float*>(inv_scale.data_ptr());
  const bool multiply = inv != 1.0f;
  bool bad = false;
  kernels::dispatch_floating(grads[0].dtype(), kUnscaleWhere, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (const Tensor& g : grads)
      if (unscale_tensor<T>(g, static_cast<acc_t<T>>(inv), multiply)) bad = true;
  });
  if (bad) *static_cast<float*>(found_inf.data_ptr()) = 1.0f;
}

void update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                   double growth_factor, double backoff_factor, int64_t growth_interval) {
  check_state_scalar(scale, kFloat32, "scale", kUpdateWhere);
  check_state_scalar(growth_tracker, kInt32, "growth_tracker", kUpdateWhere);
  check_state_scalar(found_inf, kFloat32, "found_inf", kUpdateWhere);
  if (scale.is_cuda() || growth_tracker.is_cuda() || found_inf.is_cuda()) {
    // Three scalars: the rule runs on host copies, written back to where they live.
    const Tensor s = scale.to(kCPU), t = growth_tracker.to(kCPU);
    update_scale_(s, t, found_inf.to(kCPU), growth_factor, backoff_factor, growth_interval);
    if (!s.is_same(scale)) mantissa::detail::copy_unchecked(Tensor(scale), s);
    if (!t.is_same(growth_tracker)) mantissa::detail::copy_unchecked(Tensor(growth_tracker), t);
    return;
  }
  float& s = *static_cast<float*>(scale.data_ptr());
  int32_t& tracker = *static_cast<int32_t*>(growth_tracker.data_ptr());
  const float inf_count = *static_cast<const float*>(found_inf.data_ptr());
  if (inf_count != 0.0f) {
    s = static_cast<float>(static_cast<double>(s) * backoff_factor);
    tracker = 0;
    return;
  }
  const int64_t successful = static_cast<int64_t>(tracker) + 1;
  if (successful == growth_interval) {
    const float grown = static_cast<float>(static_cast<double>(s) * growth_factor);
    // Never grow to +inf (PyTorch >= 2.1); the tracker restarts even when growth is refused.
    if (std::isfinite(grown)) s = grown;
    tracker = 0;
  } else {
    tracker = static_cast<int32_t>(successful);  // C++20: wraps modulo 2^32
  }
}

}  // namespace mantissa::amp
