// The SwiGLU kernels of silu_mul.h: chunks of elements widened to fp32 by the bulk conversions,
// SiLU and its derivative by vec_math, each intermediate the composed graph stores rounded to
// the dtype here too. Compiled at the baseline ISA: no product is contracted into an FMA.
#include "kernels/cpu/elementwise/silu_mul.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/elementwise/vec_math.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::cpu {
namespace {

constexpr int64_t kChunk = 1024;

void widen(DType dt, const void* src, int64_t at, float* dst, int64_t n) {
  if (dt == kBFloat16)
    convert_bf16_to_f32(static_cast<const uint16_t*>(src) + at, dst, n);
  else if (dt == kFloat16)
    convert_f16_to_f32(static_cast<const uint16_t*>(src) + at, dst, n);
  else
    std::memcpy(dst, static_cast<const float*>(src) + at, static_cast<size_t>(n) * sizeof(float));
}

void narrow(DType dt, const float* src, void* dst, int64_t at, int64_t n) {
  if (dt == kBFloat16)
    convert_f32_to_bf16(src, static_cast<uint16_t*>(dst) + at, n);
  else if (dt == kFloat16)
    convert_f32_to_f16(src, static_cast<uint16_t*>(dst) + at, n);
  else
    std::memcpy(static_cast<float*>(dst) + at, src, static_cast<size_t>(n) * sizeof(float));
}

// v rounded to dt in place (nothing to do for float32).
void round_to(DType dt, float* v, int64_t n) {
  if (dt == kFloat32) return;
  uint16_t tmp[kChunk];
  narrow(dt, v, tmp, 0, n);
  widen(dt, tmp, 0, v, n);
}

template <typename F>
void over_chunks(int64_t n, F f) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n >= (int64_t{1} << 16))
  for (int64_t c = 0; c < chunks; ++c) f(c * kChunk, std::min(kChunk, n - c * kChunk));
}

void check_dtype(DType dt) {
  MANTISSA_CHECK(dt == kFloat32 || dt == kBFloat16 || dt == kFloat16, "silu_mul",
                 "the fused kernel takes float32, bfloat16 or float16, got {}", dt.name());
}

}  // namespace

void silu_mul_forward(DType dt, const void* gate, const void* up, void* out, int64_t n) {
  check_dtype(dt);
  over_chunks(n, [&](int64_t at, int64_t len) {
    float s[kChunk], u[kChunk];
    widen(dt, gate, at, s, len);
    vm::silu_f32(s, s, len);
    round_to(dt, s, len);  // silu(gate) as stored in the dtype
    widen(dt, up, at, u, len);
    for (int64_t i = 0; i < len; ++i) s[i] *= u[i];
    narrow(dt, s, out, at, len);
  });
}

void silu_mul_backward(DType dt, const void* go, const void* gate, const void* up, void* dgate,
                       void* dup, int64_t n) {
  check_dtype(dt);
  over_chunks(n, [&](int64_t at, int64_t len) {
    float g[kChunk], x[kChunk], t[kChunk];
    widen(dt, go, at, g, len);
    widen(dt, gate, at, x, len);
    if (dup != nullptr) {
      vm::silu_f32(x, t, len);
      round_to(dt, t, len);
      for (int64_t i = 0; i < len; ++i) t[i] *= g[i];
      narrow(dt, t, dup, at, len);
    }
    if (dgate != nullptr) {
      widen(dt, up, at, t, len);
      for (int64_t i = 0; i < len; ++i) t[i] *= g[i];
      round_to(dt, t, len);  // the gradient reaching silu, as stored in the dtype
      vm::silu_backward_f32(t, x, t, len);
      narrow(dt, t, dgate, at, len);
    }
  });
}

}  // namespace mantissa::kernels::cpu
