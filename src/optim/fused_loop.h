#pragma once
// Shared machinery of the fused optimizer loops.
//
// An update is written once as a template over its arithmetic type X: the scalar type A (float
// or double) or a 16-byte SIMD pack of A (GCC vector extensions; SSE2 is part of every x86-64,
// so no run-time dispatch is needed). The compiler does not vectorize these loops by itself:
// std::sqrt keeps errno semantics, which blocks vectorization unless the whole build uses
// -fno-math-errno. Packs apply the same IEEE operations in the same order as the scalar code,
// so every element gets bit-identical results whichever path or thread handles it.
// f16/bf16 parameters are converted to fp32 in blocks and take the same packed path.
#include <emmintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/dispatch.h"
#include "mantissa/core/convert.h"

namespace mantissa::optim::detail {

using f32x4 = float __attribute__((vector_size(16)));
using f64x2 = double __attribute__((vector_size(16)));

template <typename A>
struct Pack;
template <>
struct Pack<float> {
  using type = f32x4;
  static constexpr int kWidth = 4;
};
template <>
struct Pack<double> {
  using type = f64x2;
  static constexpr int kWidth = 2;
};

inline float sqrt_of(float x) { return std::sqrt(x); }
inline double sqrt_of(double x) { return std::sqrt(x); }
inline f32x4 sqrt_of(f32x4 x) {
  return reinterpret_cast<f32x4>(_mm_sqrt_ps(reinterpret_cast<__m128>(x)));
}
inline f64x2 sqrt_of(f64x2 x) {
  return reinterpret_cast<f64x2>(_mm_sqrt_pd(reinterpret_cast<__m128d>(x)));
}

// torch.maximum: the larger value, NaN when either is NaN.
inline float max_nan(float a, float b) { return (a > b || a != a) ? a : b; }
inline double max_nan(double a, double b) { return (a > b || a != a) ? a : b; }
inline f32x4 max_nan(f32x4 a, f32x4 b) { return (a > b || a != a) ? a : b; }
inline f64x2 max_nan(f64x2 a, f64x2 b) { return (a > b || a != a) ? a : b; }

template <typename V>
inline V load_pack(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V>
inline void store_pack(void* p, V v) {
  std::memcpy(p, &v, sizeof(V));
}

// Splits [0, n) into one contiguous range per thread (a fixed partition for a given thread
// count) and calls body(begin, end) on each; single-threaded below the parallel grain.
template <typename F>
void parallel_ranges(int64_t n, F&& body) {
  if (n <= kernels::kParallelGrain) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t t = omp_get_thread_num();
    // Range edges on multiples of 16 elements keep each thread's packs aligned alike.
    const int64_t per = ((n + threads - 1) / threads + 15) / 16 * 16;
    const int64_t begin = std::min(n, t * per);
    const int64_t end = std::min(n, begin + per);
    if (begin < end) body(begin, end);
  }
}

// Calls pack(i) for each full pack of Pack<A>::kWidth elements starting at i, then elem(i)
// for the remaining elements of [0, count).
template <typename A, typename PackFn, typename ElemFn>
inline void pack_loop(int64_t count, PackFn&& pack, ElemFn&& elem) {
  constexpr int64_t W = Pack<A>::kWidth;
  int64_t i = 0;
  for (; i + W <= count; i += W) pack(i);
  for (; i < count; ++i) elem(i);
}

// Hands the parameter and gradient elements [begin, end) to block(p, g, offset, count) as
// arrays of the arithmetic type A. For f32/f64 these are the tensors' own memory; for f16/bf16
// they are fp32 copies of one block at a time (converted with the SIMD converters), and the
// parameter block is rounded back (RNE, once) after block() updates it.
template <typename T, typename Block>
inline void for_blocks(T* p, const T* g, int64_t begin, int64_t end, Block&& block) {
  using A = kernels::acc_t<T>;
  if constexpr (std::is_same_v<T, A>) {
    block(p + begin, g + begin, begin, end - begin);
  } else {
    constexpr int64_t kBlock = 512;
    constexpr DType dt = dtype_of<T>();
    alignas(64) A pb[kBlock];
    alignas(64) A gb[kBlock];
    for (int64_t s = begin; s < end; s += kBlock) {
      const int64_t count = std::min(kBlock, end - s);
      convert_buffer(p + s, dt, pb, kFloat32, count);
      convert_buffer(g + s, dt, gb, kFloat32, count);
      block(pb, static_cast<const A*>(gb), s, count);
      convert_buffer(pb, kFloat32, p + s, dt, count);
    }
  }
}

}  // namespace mantissa::optim::detail
