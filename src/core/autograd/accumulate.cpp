#include "core/autograd/accumulate.h"

#include <algorithm>
#include <type_traits>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/dtype_dispatch.h"
#include "mantissa/core/convert.h"
#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/sum_kernels.h"
#include "core/cuda/tensor_transfer.h"
#endif

namespace mantissa::autograd {
namespace {

constexpr int64_t kBlock = 256;

// out[i] = x[i] + y[i] over [0, n) of contiguous arrays, in fp32 for fp16/bf16 (widened and
// rounded back in bulk, one RNE rounding per element) and in T itself for f32/f64: the bits of
// kernels::pointwise with an add, written here because autograd sits below the kernels layer.
template <typename T>
void add_span(const T* x, const T* y, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    alignas(64) float a[kBlock], b[kBlock];
    const auto* xs = reinterpret_cast<const uint16_t*>(x);
    const auto* ys = reinterpret_cast<const uint16_t*>(y);
    auto* os = reinterpret_cast<uint16_t*>(out);
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t m = std::min(kBlock, n - i);
      if constexpr (std::is_same_v<T, Half>) {
        convert_f16_to_f32(xs + i, a, m);
        convert_f16_to_f32(ys + i, b, m);
      } else {
        convert_bf16_to_f32(xs + i, a, m);
        convert_bf16_to_f32(ys + i, b, m);
      }
      for (int64_t k = 0; k < m; ++k) a[k] += b[k];
      if constexpr (std::is_same_v<T, Half>) {
        convert_f32_to_f16(a, os + i, m);
      } else {
        convert_f32_to_bf16(a, os + i, m);
      }
    }
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
  }
}

}  // namespace

Tensor add_gradients(const Tensor& a, const Tensor& b) {
  MANTISSA_CHECK(a.shape() == b.shape(), "autograd", "gradient shapes differ: {} vs {}",
                 shape_str(a.shape()), shape_str(b.shape()));
#if MANTISSA_HAS_CUDA
  if (a.is_cuda() || b.is_cuda()) {
    MANTISSA_CHECK(a.device() == b.device(), "autograd",
                   "gradients on two devices ({} and {}) cannot be added", a.device().str(),
                   b.device().str());
    cuda::detail::DeviceGuard guard(a.device());
    const Tensor x = a.contiguous();
    const Tensor y = b.to(a.dtype()).contiguous();
    Tensor out = empty(a.shape(), a.dtype(), a.device());
    cuda::detail::launch_add(x.device_ptr(), y.device_ptr(), out.device_ptr(),
                             detail::cuda_scalar_of(a.dtype(), "autograd"), out.numel());
    return out;
  }
#endif
  Tensor x = a.contiguous();
  Tensor y = b.to(a.dtype()).contiguous();
  Tensor out = empty(a.shape(), a.dtype());
  const int64_t n = out.numel();
  if (a.dtype().is_complex()) {
    // Complex adds part by part: a complex64 array is a float array twice as long.
    const int64_t parts = 2 * n;
    if (a.dtype() == kComplex64) {
      add_span(static_cast<const float*>(x.data_ptr()), static_cast<const float*>(y.data_ptr()),
               static_cast<float*>(out.data_ptr()), parts);
    } else {
      add_span(static_cast<const double*>(x.data_ptr()), static_cast<const double*>(y.data_ptr()),
               static_cast<double*>(out.data_ptr()), parts);
    }
    return out;
  }
  kernels::dispatch_floating(a.dtype(), "autograd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    const T* yp = y.data<T>();
    T* op = out.data<T>();
#ifdef _OPENMP
    if (n > kernels::kParallelGrain && !omp_in_parallel()) {
#pragma omp parallel
      {
        // Static partition with chunk edges on 64-element boundaries (no shared cache lines).
        const int64_t nt = omp_get_num_threads();
        const int64_t t = omp_get_thread_num();
        const int64_t chunk = ((n + nt - 1) / nt + 63) & ~int64_t{63};
        const int64_t begin = std::min(n, t * chunk);
        const int64_t end = std::min(n, begin + chunk);
        if (begin < end) add_span(xp + begin, yp + begin, op + begin, end - begin);
      }
      return;
    }
#endif
    add_span(xp, yp, op, n);
  });
  return out;
}

}  // namespace mantissa::autograd
