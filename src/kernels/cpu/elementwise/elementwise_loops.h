#pragma once
// pointwise: the one loop behind every elementwise op and elementwise backward.
//
//   pointwise<TOut, TIn...>(out, {in...}, f)
//
// writes out[i] = f(load(in_0[i]), load(in_1[i]), ...) for a fresh contiguous `out`, with
// every input broadcast to out's shape (any strides). f sees the arithmetic type of each input
// (acc_t: fp32 for fp16/bf16) and its result is rounded once into TOut.
//
// Work goes in blocks of kBlock elements: contiguous fp16/bf16 runs are widened with the bulk
// SIMD conversions into a small fp32 buffer, f runs over plain arrays (so simple bodies
// vectorise), and narrow outputs are rounded back in bulk.
#include <algorithm>
#include <array>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/strided_loops.h"
#include "mantissa/core/convert.h"

namespace mantissa::kernels {

template <typename T>
inline constexpr bool kIsNarrowFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

inline constexpr int64_t kBlock = 256;

// The n values p[0], p[stride], ... in the arithmetic type: the source itself when it is
// already contiguous in that type, otherwise widened into buf.
template <typename T>
inline const acc_t<T>* load_block(const T* p, int64_t stride, int64_t n, acc_t<T>* buf) {
  using A = acc_t<T>;
  if constexpr (std::is_same_v<T, A>) {
    if (stride == 1) return p;
  }
  if constexpr (std::is_same_v<T, Half>) {
    if (stride == 1) {
      convert_f16_to_f32(reinterpret_cast<const uint16_t*>(p), buf, n);
      return buf;
    }
  }
  if constexpr (std::is_same_v<T, BFloat16>) {
    if (stride == 1) {
      convert_bf16_to_f32(reinterpret_cast<const uint16_t*>(p), buf, n);
      return buf;
    }
  }
  if (stride == 0) {
    const A v = load(*p);
    for (int64_t i = 0; i < n; ++i) buf[i] = v;
    return buf;
  }
  for (int64_t i = 0; i < n; ++i) buf[i] = load(p[i * stride]);
  return buf;
}

// Rounds n fp32 values into a narrow float buffer (one RNE rounding each).
template <typename T>
inline void store_narrow(const float* src, T* dst, int64_t n) {
  if constexpr (std::is_same_v<T, Half>) {
    convert_f32_to_f16(src, reinterpret_cast<uint16_t*>(dst), n);
  } else {
    convert_f32_to_bf16(src, reinterpret_cast<uint16_t*>(dst), n);
  }
}

// n contiguous float32, bfloat16 or float16 values widened into dst (a copy for float32).
template <typename T>
inline void widen_block(const T* src, float* dst, int64_t n) {
  const float* p = load_block(src, 1, n, dst);
  if (p != dst) std::copy(p, p + n, dst);
}

// n fp32 values rounded into contiguous float32, bfloat16 or float16 (a copy for float32).
template <typename T>
inline void narrow_block(const float* src, T* dst, int64_t n) {
  if constexpr (kIsNarrowFloat<T>)
    store_narrow(src, dst, n);
  else
    std::copy(src, src + n, dst);
}

// A unary map with a bulk float32 kernel beside its per-element form: the kernel serves
// f32/f16/bf16 blocks (computed in fp32), the element form f64. Operations of both must agree
// to within float accuracy; see kernels/cpu/elementwise/vec_math.h.
template <typename F>
struct VecUnary {
  F f;
  void (*block)(const float* x, float* y, int64_t n);
  template <typename A>
  A operator()(A x) const {
    return f(x);
  }
};
template <typename F>
VecUnary<F> vec_unary(F f, void (*block)(const float*, float*, int64_t)) {
  return {f, block};
}
template <typename F>
inline constexpr bool kIsVecUnary = false;
template <typename F>
inline constexpr bool kIsVecUnary<VecUnary<F>> = true;

// A binary map (a gradient g * f'(x)) with a bulk float32 kernel block(g, x, out, n) beside its
// per-element form, as VecUnary.
template <typename F>
struct VecBinary {
  F f;
  void (*block)(const float* a, const float* b, float* y, int64_t n);
  template <typename A, typename B>
  auto operator()(A a, B b) const {
    return f(a, b);
  }
};
template <typename F>
VecBinary<F> vec_binary(F f, void (*block)(const float*, const float*, float*, int64_t)) {
  return {f, block};
}
template <typename F>
inline constexpr bool kIsVecBinary = false;
template <typename F>
inline constexpr bool kIsVecBinary<VecBinary<F>> = true;

// A map with whole-array kernels for contiguous f32, bf16 and f16 (bits) operands, bit-identical
// to its per-element form f, which serves every other dtype and layout. For maps that need no
// widening at all (relu: a sign test and a select), so bf16 and f16 skip the fp32 round trip.
template <typename T, size_t K>
struct ArrayKernel;
template <typename T>
struct ArrayKernel<T, 1> {
  using type = void (*)(const T*, T*, int64_t);
};
template <typename T>
struct ArrayKernel<T, 2> {
  using type = void (*)(const T*, const T*, T*, int64_t);
};

template <typename F, size_t K>
struct ExactMap {
  F f;
  typename ArrayKernel<float, K>::type f32;
  typename ArrayKernel<uint16_t, K>::type bf16;
  typename ArrayKernel<uint16_t, K>::type f16;
  template <typename... A>
  auto operator()(A... a) const {
    return f(a...);
  }
};
template <size_t K, typename F>
ExactMap<F, K> exact_map(F f, typename ArrayKernel<float, K>::type f32,
                         typename ArrayKernel<uint16_t, K>::type bf16,
                         typename ArrayKernel<uint16_t, K>::type f16) {
  return {f, f32, bf16, f16};
}
template <typename F>
inline constexpr bool kIsExactMap = false;
template <typename F, size_t K>
inline constexpr bool kIsExactMap<ExactMap<F, K>> = true;

namespace detail {

template <typename TOut, typename... TIn, typename F, size_t... I>
void run_span(TOut* o, const std::tuple<const TIn*...>& p,
              const std::array<int64_t, sizeof...(TIn)>& s, int64_t n, F& f,
              std::index_sequence<I...>) {
  constexpr size_t K = sizeof...(TIn);
  if constexpr (kIsExactMap<F>) {
    if (((s[I] == 1) && ...)) {
      if constexpr (std::is_same_v<TOut, float> && (std::is_same_v<TIn, float> && ...)) {
        f.f32(std::get<I>(p)..., o, n);
        return;
      } else if constexpr (std::is_same_v<TOut, BFloat16> &&
                           (std::is_same_v<TIn, BFloat16> && ...)) {
        f.bf16(reinterpret_cast<const uint16_t*>(std::get<I>(p))..., reinterpret_cast<uint16_t*>(o),
               n);
        return;
      } else if constexpr (std::is_same_v<TOut, Half> && (std::is_same_v<TIn, Half> && ...)) {
        f.f16(reinterpret_cast<const uint16_t*>(std::get<I>(p))..., reinterpret_cast<uint16_t*>(o),
              n);
        return;
      }
    }
  }
  // Raw storage (no zero-initialisation per block); each input uses its own row.
  alignas(64) unsigned char raw[K > 0 ? K : 1][kBlock * sizeof(double)];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    const auto src = std::make_tuple(
        load_block(std::get<I>(p) + b * s[I], s[I], m, reinterpret_cast<acc_t<TIn>*>(raw[I]))...);
    if constexpr (kIsVecUnary<F> && K == 1 && std::is_same_v<acc_t<TOut>, float> &&
                  (std::is_same_v<acc_t<TIn>, float> && ...)) {
      if constexpr (kIsNarrowFloat<TOut>) {
        alignas(64) float ob[kBlock];
        f.block(std::get<0>(src), ob, m);
        store_narrow(ob, o + b, m);
      } else {
        f.block(std::get<0>(src), o + b, m);
      }
    } else if constexpr (kIsVecBinary<F> && K == 2 && std::is_same_v<acc_t<TOut>, float> &&
                         (std::is_same_v<acc_t<TIn>, float> && ...)) {
      if constexpr (kIsNarrowFloat<TOut>) {
        alignas(64) float ob[kBlock];
        f.block(std::get<0>(src), std::get<1>(src), ob, m);
        store_narrow(ob, o + b, m);
      } else {
        f.block(std::get<0>(src), std::get<1>(src), o + b, m);
      }
    } else if constexpr (kIsNarrowFloat<TOut>) {
      alignas(64) float ob[kBlock];
      // The build's -O2 vectorises only loops of known trip count; the elements are
      // independent, so ask for it (relu and friends were scalar, branching on signs).
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) ob[i] = static_cast<float>(f(std::get<I>(src)[i]...));
      store_narrow(ob, o + b, m);
    } else {
      TOut* ob = o + b;
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) ob[i] = store<TOut>(f(std::get<I>(src)[i]...));
    }
  }
}

}  // namespace detail

template <typename TOut, typename... TIn, typename F>
void pointwise(const Tensor& out, const std::array<Tensor, sizeof...(TIn)>& ins, F f) {
  constexpr size_t K = sizeof...(TIn);
  using Seq = std::index_sequence_for<TIn...>;
  const Shape& shape = out.shape();
  const int64_t n = out.numel();
  if (n == 0) return;
  TOut* o = static_cast<TOut*>(out.data_ptr());
  std::array<const void*, K> base{};
  for (size_t k = 0; k < K; ++k) base[k] = ins[k].data_ptr();
  auto ptrs_at = [&]<size_t... I>(const std::array<int64_t, K>& off, std::index_sequence<I...>) {
    return std::make_tuple(static_cast<const TIn*>(base[I]) + off[I]...);
  };

  // Flat path: each input is either laid out exactly like out or a single element.
  bool flat = true;
  std::array<int64_t, K> fs{};
  for (size_t k = 0; k < K; ++k) {
    if (ins[k].numel() == 1) {
      fs[k] = 0;
    } else if (ins[k].shape() == shape && ins[k].is_contiguous()) {
      fs[k] = 1;
    } else {
      flat = false;
    }
  }
  if (flat) {
    auto run = [&](int64_t begin, int64_t end) {
      std::array<int64_t, K> off{};
      for (size_t k = 0; k < K; ++k) off[k] = begin * fs[k];
      detail::run_span<TOut, TIn...>(o + begin, ptrs_at(off, Seq{}), fs, end - begin, f, Seq{});
    };
#ifdef _OPENMP
    if (n > kParallelGrain && !omp_in_parallel()) {
#pragma omp parallel
      {
        // Static partition with chunk edges on 64-element boundaries (no shared cache lines).
        const int64_t nt = omp_get_num_threads();
        const int64_t t = omp_get_thread_num();
        const int64_t chunk = ((n + nt - 1) / nt + 63) & ~int64_t{63};
        const int64_t begin = std::min(n, t * chunk);
        const int64_t end = std::min(n, begin + chunk);
        if (begin < end) run(begin, end);
      }
      return;
    }
#endif
    run(0, n);
    return;
  }

  // Strided/broadcast path: one innermost row at a time.
  std::array<Shape, K + 1> strides;
  strides[0] = out.strides();
  for (size_t k = 0; k < K; ++k) strides[k + 1] = broadcast_strides(ins[k], shape);
  std::array<const Shape*, K + 1> sp;
  for (size_t k = 0; k <= K; ++k) sp[k] = &strides[k];
  std::array<int64_t, K> inner{};
  for (size_t k = 0; k < K; ++k) inner[k] = shape.empty() ? 0 : strides[k + 1].back();
  for_each_row<K + 1>(shape, sp, [&](const std::array<int64_t, K + 1>& off, int64_t count) {
    std::array<int64_t, K> in_off{};
    for (size_t k = 0; k < K; ++k) in_off[k] = off[k + 1];
    detail::run_span<TOut, TIn...>(o + off[0], ptrs_at(in_off, Seq{}), inner, count, f, Seq{});
  });
}

}  // namespace mantissa::kernels
