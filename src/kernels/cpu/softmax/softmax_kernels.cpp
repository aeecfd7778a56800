// The softmax loops of kernels/cpu/softmax/softmax_kernels.h.
#include "kernels/cpu/softmax/softmax_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "kernels/cpu/elementwise/elementwise_loops.h"
#include "kernels/cpu/elementwise/vec_math.h"

namespace mantissa::kernels {
namespace {

// NaN-propagating max: once a NaN is seen the row's result is NaN, as in PyTorch.
template <typename A>
inline A nan_max(A m, A x) {
  return (x > m || x != x) ? x : m;
}

// Stores c fp32 values into a row of T (one rounding each for f16/bf16).
template <typename T>
void store_row(const float* src, T* dst, int64_t c) {
  if constexpr (std::is_same_v<T, float>) {
    std::copy(src, src + c, dst);
  } else {
    store_narrow(src, dst, c);
  }
}

// One contiguous row computed in fp32 (f32, f16, bf16) with the vectorised max and exp: the sum of
// exp(x - m) goes in kBlock-sized pieces (fixed order, independent of the thread count), then
// either log-sum-exp is subtracted or exp(x - m) is recomputed and scaled (f32 keeps the
// first pass's exp values in y instead).
template <typename T, bool kLog>
void softmax_row_f32(const T* xr, T* yr, int64_t n) {
  constexpr int64_t kB = kBlock;
  alignas(64) float xb[kB], eb[kB];
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t b = 0; b < n; b += kB) {
    const int64_t c = std::min(kB, n - b);
    m = nan_max(m, vm::max_f32(load_block(xr + b, 1, c, xb), c));
  }
  float s = 0;
  for (int64_t b = 0; b < n; b += kB) {
    const int64_t c = std::min(kB, n - b);
    const float* xs = load_block(xr + b, 1, c, xb);
    float* e = eb;
    if constexpr (std::is_same_v<T, float>) {
      if (!kLog) e = yr + b;
    }
    s += vm::exp_shift_sum_f32(xs, m, e, c);
  }
  if constexpr (kLog) {
    const float lse = m + std::log(s);
    for (int64_t b = 0; b < n; b += kB) {
      const int64_t c = std::min(kB, n - b);
      const float* xs = load_block(xr + b, 1, c, xb);
      for (int64_t k = 0; k < c; ++k) eb[k] = xs[k] - lse;
      store_row(eb, yr + b, c);
    }
  } else {
    const float inv = 1.0f / s;
    if constexpr (std::is_same_v<T, float>) {
      for (int64_t k = 0; k < n; ++k) yr[k] *= inv;
    } else {
      for (int64_t b = 0; b < n; b += kB) {
        const int64_t c = std::min(kB, n - b);
        const float* xs = load_block(xr + b, 1, c, xb);
        vm::exp_shift_sum_f32(xs, m, eb, c);
        for (int64_t k = 0; k < c; ++k) eb[k] *= inv;
        store_row(eb, yr + b, c);
      }
    }
  }
}

// One (n, inner) block with the softmax over n, in fp32 with the vectorised exp and log: columns
// go in strips of kBlock, each strip walking the n rows in order (max, then sum of exp, then
// the outputs), so every column's arithmetic is the same sequence for any thread count.
template <typename T, bool kLog>
void softmax_strided_f32(const T* x, T* y, int64_t n, int64_t inner) {
  constexpr int64_t kB = kBlock;
  alignas(64) float m[kB], s[kB], xb[kB], e[kB];
  for (int64_t j0 = 0; j0 < inner; j0 += kB) {
    const int64_t w = std::min(kB, inner - j0);
    std::fill(m, m + w, -std::numeric_limits<float>::infinity());
    std::fill(s, s + w, 0.0f);
    for (int64_t k = 0; k < n; ++k) {
      const float* xs = load_block(x + k * inner + j0, 1, w, xb);
      for (int64_t j = 0; j < w; ++j) m[j] = nan_max(m[j], xs[j]);
    }
    for (int64_t k = 0; k < n; ++k) {
      const float* xs = load_block(x + k * inner + j0, 1, w, xb);
      for (int64_t j = 0; j < w; ++j) e[j] = xs[j] - m[j];
      vm::exp_f32(e, e, w);
      for (int64_t j = 0; j < w; ++j) s[j] += e[j];
    }
    if constexpr (kLog) {
      vm::log_f32(s, s, w);
      for (int64_t j = 0; j < w; ++j) s[j] += m[j];
    } else {
      for (int64_t j = 0; j < w; ++j) s[j] = 1.0f / s[j];
    }
    for (int64_t k = 0; k < n; ++k) {
      const float* xs = load_block(x + k * inner + j0, 1, w, xb);
      if constexpr (kLog) {
        for (int64_t j = 0; j < w; ++j) e[j] = xs[j] - s[j];
      } else {
        for (int64_t j = 0; j < w; ++j) e[j] = xs[j] - m[j];
        vm::exp_f32(e, e, w);
        for (int64_t j = 0; j < w; ++j) e[j] *= s[j];
      }
      store_row(e, y + k * inner + j0, w);
    }
  }
}

// Backward of one (n, inner) block in fp32 (see softmax_backward), columns in strips of kBlock;
// for inner == 1 the strip runs along the row instead. The sums go in row order per column.
template <typename T, bool kLog>
void softmax_backward_f32(const T* y, const T* g, T* dx, int64_t n, int64_t inner) {
  constexpr int64_t kB = kBlock;
  alignas(64) float yb[kB], gb[kB], e[kB];
  if (inner == 1) {
    float s = 0;
    for (int64_t b = 0; b < n; b += kB) {
      const int64_t c = std::min(kB, n - b);
      const float* gs = load_block(g + b, 1, c, gb);
      if constexpr (kLog) {
        for (int64_t k = 0; k < c; ++k) s += gs[k];
      } else {
        const float* ys = load_block(y + b, 1, c, yb);
        for (int64_t k = 0; k < c; ++k) s += gs[k] * ys[k];
      }
    }
    for (int64_t b = 0; b < n; b += kB) {
      const int64_t c = std::min(kB, n - b);
      const float* gs = load_block(g + b, 1, c, gb);
      const float* ys = load_block(y + b, 1, c, yb);
      if constexpr (kLog) {
        vm::exp_f32(ys, e, c);
        for (int64_t k = 0; k < c; ++k) e[k] = gs[k] - e[k] * s;
      } else {
        for (int64_t k = 0; k < c; ++k) e[k] = ys[k] * (gs[k] - s);
      }
      store_row(e, dx + b, c);
    }
    return;
  }
  alignas(64) float s[kB];
  for (int64_t j0 = 0; j0 < inner; j0 += kB) {
    const int64_t w = std::min(kB, inner - j0);
    std::fill(s, s + w, 0.0f);
    for (int64_t k = 0; k < n; ++k) {
      const float* gs = load_block(g + k * inner + j0, 1, w, gb);
      if constexpr (kLog) {
        for (int64_t j = 0; j < w; ++j) s[j] += gs[j];
      } else {
        const float* ys = load_block(y + k * inner + j0, 1, w, yb);
        for (int64_t j = 0; j < w; ++j) s[j] += gs[j] * ys[j];
      }
    }
    for (int64_t k = 0; k < n; ++k) {
      const float* gs = load_block(g + k * inner + j0, 1, w, gb);
      const float* ys = load_block(y + k * inner + j0, 1, w, yb);
      if constexpr (kLog) {
        vm::exp_f32(ys, e, w);
        for (int64_t j = 0; j < w; ++j) e[j] = gs[j] - e[j] * s[j];
      } else {
        for (int64_t j = 0; j < w; ++j) e[j] = ys[j] * (gs[j] - s[j]);
      }
      store_row(e, dx + k * inner + j0, w);
    }
  }
}

}  // namespace

SoftmaxLayout softmax_layout(const Shape& shape, int64_t dim) {
  SoftmaxLayout l;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim)
      l.outer *= shape[d];
    else if (d == dim)
      l.n = shape[d];
    else
      l.inner *= shape[d];
  }
  return l;
}

template <typename T, bool kLog>
void softmax_forward(const T* x, T* y, const SoftmaxLayout& l) {
  using A = acc_t<T>;
  const int64_t total = l.outer * l.n * l.inner;
  if (l.inner == 1) {
#pragma omp parallel for schedule(static) if (total > kParallelGrain && l.outer > 1)
    for (int64_t o = 0; o < l.outer; ++o) {
      const T* xr = x + o * l.n;
      T* yr = y + o * l.n;
      if constexpr (std::is_same_v<A, float>) {
        softmax_row_f32<T, kLog>(xr, yr, l.n);
        continue;
      }
      A m = -std::numeric_limits<A>::infinity();
      for (int64_t k = 0; k < l.n; ++k) m = nan_max(m, load(xr[k]));
      A s = 0;
      for (int64_t k = 0; k < l.n; ++k) s += std::exp(load(xr[k]) - m);
      if constexpr (kLog) {
        const A lse = m + std::log(s);
        for (int64_t k = 0; k < l.n; ++k) yr[k] = store<T>(load(xr[k]) - lse);
      } else {
        const A inv = A(1) / s;
        for (int64_t k = 0; k < l.n; ++k) yr[k] = store<T>(std::exp(load(xr[k]) - m) * inv);
      }
    }
    return;
  }
  // Strided dimension: walk the n rows of each outer block with an inner-sized accumulator,
  // so memory is read in order and the inner loop vectorises.
#pragma omp parallel for schedule(static) if (total > kParallelGrain && l.outer > 1)
  for (int64_t o = 0; o < l.outer; ++o) {
    const T* xb = x + o * l.n * l.inner;
    T* yb = y + o * l.n * l.inner;
    if constexpr (std::is_same_v<A, float>) {
      softmax_strided_f32<T, kLog>(xb, yb, l.n, l.inner);
      continue;
    }
    std::vector<A> m(l.inner, -std::numeric_limits<A>::infinity()), s(l.inner, A(0));
    for (int64_t k = 0; k < l.n; ++k)
      for (int64_t j = 0; j < l.inner; ++j) m[j] = nan_max(m[j], load(xb[k * l.inner + j]));
    for (int64_t k = 0; k < l.n; ++k)
      for (int64_t j = 0; j < l.inner; ++j) s[j] += std::exp(load(xb[k * l.inner + j]) - m[j]);
    for (int64_t j = 0; j < l.inner; ++j) s[j] = kLog ? m[j] + std::log(s[j]) : A(1) / s[j];
    for (int64_t k = 0; k < l.n; ++k) {
      for (int64_t j = 0; j < l.inner; ++j) {
        const A v = load(xb[k * l.inner + j]);
        yb[k * l.inner + j] = store<T>(kLog ? v - s[j] : std::exp(v - m[j]) * s[j]);
      }
    }
  }
}

template <typename T, bool kLog>
void softmax_backward(const T* y, const T* g, T* dx, const SoftmaxLayout& l) {
  using A = acc_t<T>;
  const int64_t total = l.outer * l.n * l.inner;
#pragma omp parallel for schedule(static) if (total > kParallelGrain && l.outer > 1)
  for (int64_t o = 0; o < l.outer; ++o) {
    const int64_t base = o * l.n * l.inner;
    if constexpr (std::is_same_v<A, float>) {
      softmax_backward_f32<T, kLog>(y + base, g + base, dx + base, l.n, l.inner);
      continue;
    }
    std::vector<A> s(l.inner, A(0));
    for (int64_t k = 0; k < l.n; ++k) {
      for (int64_t j = 0; j < l.inner; ++j) {
        const int64_t i = base + k * l.inner + j;
        s[j] += kLog ? load(g[i]) : load(g[i]) * load(y[i]);
      }
    }
    for (int64_t k = 0; k < l.n; ++k) {
      for (int64_t j = 0; j < l.inner; ++j) {
        const int64_t i = base + k * l.inner + j;
        const A gy = load(g[i]), yy = load(y[i]);
        dx[i] = store<T>(kLog ? gy - std::exp(yy) * s[j] : yy * (gy - s[j]));
      }
    }
  }
}

#define MANTISSA_SOFTMAX_INSTANTIATE(T, kLog)                                 \
  template void softmax_forward<T, kLog>(const T*, T*, const SoftmaxLayout&); \
  template void softmax_backward<T, kLog>(const T*, const T*, T*, const SoftmaxLayout&);
MANTISSA_SOFTMAX_INSTANTIATE(double, false)
MANTISSA_SOFTMAX_INSTANTIATE(double, true)
MANTISSA_SOFTMAX_INSTANTIATE(float, false)
MANTISSA_SOFTMAX_INSTANTIATE(float, true)
MANTISSA_SOFTMAX_INSTANTIATE(Half, false)
MANTISSA_SOFTMAX_INSTANTIATE(Half, true)
MANTISSA_SOFTMAX_INSTANTIATE(BFloat16, false)
MANTISSA_SOFTMAX_INSTANTIATE(BFloat16, true)
#undef MANTISSA_SOFTMAX_INSTANTIATE

}  // namespace mantissa::kernels
