// The SwiGLU kernels of silu_mul.h: chunks of elements widened to fp32 by the bulk conversions
// (widen_block, narrow_block), SiLU and its derivative by vec_math, each intermediate the
// composed graph stores rounded to the dtype here too. Compiled at the baseline ISA: no product
// is contracted into an FMA.
#include "kernels/cpu/elementwise/silu_mul.h"

#include <algorithm>

#include "kernels/cpu/elementwise/elementwise_loops.h"
#include "kernels/cpu/elementwise/vec_math.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::cpu {
namespace {

constexpr int64_t kChunk = 1024;

// v rounded to T in place (nothing to do for float32).
template <typename T>
void round_to(float* v, int64_t n) {
  if constexpr (kIsNarrowFloat<T>) {
    T tmp[kChunk];
    narrow_block(v, tmp, n);
    widen_block(tmp, v, n);
  }
}

template <typename F>
void over_chunks(int64_t n, F f) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n >= (int64_t{1} << 16))
  for (int64_t c = 0; c < chunks; ++c) f(c * kChunk, std::min(kChunk, n - c * kChunk));
}

template <typename T>
void forward(const T* gate, const T* up, T* out, int64_t n) {
  over_chunks(n, [&](int64_t at, int64_t len) {
    float s[kChunk], u[kChunk];
    widen_block(gate + at, s, len);
    vm::silu_f32(s, s, len);
    round_to<T>(s, len);  // silu(gate) as stored in the dtype
    widen_block(up + at, u, len);
    for (int64_t i = 0; i < len; ++i) s[i] *= u[i];
    narrow_block(s, out + at, len);
  });
}

template <typename T>
void backward(const T* go, const T* gate, const T* up, T* dgate, T* dup, int64_t n) {
  over_chunks(n, [&](int64_t at, int64_t len) {
    float g[kChunk], x[kChunk], t[kChunk];
    widen_block(go + at, g, len);
    widen_block(gate + at, x, len);
    if (dup != nullptr) {
      vm::silu_f32(x, t, len);
      round_to<T>(t, len);
      for (int64_t i = 0; i < len; ++i) t[i] *= g[i];
      narrow_block(t, dup + at, len);
    }
    if (dgate != nullptr) {
      widen_block(up + at, t, len);
      for (int64_t i = 0; i < len; ++i) t[i] *= g[i];
      round_to<T>(t, len);  // the gradient reaching silu, as stored in the dtype
      vm::silu_backward_f32(t, x, t, len);
      narrow_block(t, dgate + at, len);
    }
  });
}

// fn with a tag of dt's element type: float32, bfloat16 or float16.
template <typename Fn>
void with_dtype(DType dt, Fn fn) {
  if (dt == kBFloat16) return fn(BFloat16{});
  if (dt == kFloat16) return fn(Half{});
  MANTISSA_CHECK(dt == kFloat32, "silu_mul",
                 "the fused kernel takes float32, bfloat16 or float16, got {}", dt.name());
  fn(float{});
}

}  // namespace

void silu_mul_forward(DType dt, const void* gate, const void* up, void* out, int64_t n) {
  with_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    forward(static_cast<const T*>(gate), static_cast<const T*>(up), static_cast<T*>(out), n);
  });
}

void silu_mul_backward(DType dt, const void* go, const void* gate, const void* up, void* dgate,
                       void* dup, int64_t n) {
  with_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    backward(static_cast<const T*>(go), static_cast<const T*>(gate), static_cast<const T*>(up),
             static_cast<T*>(dgate), static_cast<T*>(dup), n);
  });
}

}  // namespace mantissa::kernels::cpu
