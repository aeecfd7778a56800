// Scalar level of the 2x2 pools and the run-time choice of level.
#include "kernels/cpu/pool/pool_kernels.h"

#include <cstring>

#include "core/simd_dispatch.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/half.h"

namespace mantissa::kernels::cpu {
namespace {

float widen(float v) { return v; }
float widen(Half v) { return static_cast<float>(v); }
float widen(uint16_t v) {
  const uint32_t bits = uint32_t{v} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
// One RNE rounding, as BFloat16(float) (exact for max values and max gradients).
void narrow(float v, float& out) { out = v; }
void narrow(float v, uint16_t& out) { out = BFloat16(v).x; }
void narrow(float v, Half& out) { out = Half(v); }

template <typename T>
void max_forward(const T* x, T* y, uint8_t* tap, int64_t h, int64_t w) {
  const int64_t oh = h / 2, ow = w / 2;
  for (int64_t oy = 0; oy < oh; ++oy) {
    const T* r0 = x + 2 * oy * w;
    const T* r1 = r0 + w;
    for (int64_t ox = 0; ox < ow; ++ox) {
      const float v[4] = {widen(r0[2 * ox]), widen(r0[2 * ox + 1]), widen(r1[2 * ox]),
                          widen(r1[2 * ox + 1])};
      float best = v[0];
      uint8_t t = 0;
      for (uint8_t k = 1; k < 4; ++k) {
        if (v[k] > best || (v[k] != v[k] && best == best)) {
          best = v[k];
          t = k;
        }
      }
      narrow(best, y[oy * ow + ox]);
      tap[oy * ow + ox] = t;
    }
  }
}

template <typename T>
void max_backward(const T* gy, const uint8_t* tap, T* gx, int64_t h, int64_t w) {
  const int64_t oh = h / 2, ow = w / 2;
  for (int64_t i = 0; i < h * w; ++i) narrow(0.0f, gx[i]);
  for (int64_t oy = 0; oy < oh; ++oy)
    for (int64_t ox = 0; ox < ow; ++ox) {
      const uint8_t t = tap[oy * ow + ox];
      narrow(0.0f + widen(gy[oy * ow + ox]), gx[(2 * oy + t / 2) * w + 2 * ox + t % 2]);
    }
}

template <typename T>
void avg_forward(const T* x, T* y, int64_t h, int64_t w) {
  const int64_t oh = h / 2, ow = w / 2;
  for (int64_t oy = 0; oy < oh; ++oy) {
    const T* r0 = x + 2 * oy * w;
    const T* r1 = r0 + w;
    for (int64_t ox = 0; ox < ow; ++ox) {
      float sum = 0.0f;
      sum += widen(r0[2 * ox]);
      sum += widen(r0[2 * ox + 1]);
      sum += widen(r1[2 * ox]);
      sum += widen(r1[2 * ox + 1]);
      narrow(sum / 4.0f, y[oy * ow + ox]);
    }
  }
}

template <typename T>
void avg_backward(const T* gy, T* gx, int64_t h, int64_t w) {
  const int64_t oh = h / 2, ow = w / 2;
  for (int64_t i = 0; i < h * w; ++i) narrow(0.0f, gx[i]);
  for (int64_t oy = 0; oy < oh; ++oy)
    for (int64_t ox = 0; ox < ow; ++ox) {
      T share;
      narrow(0.0f + widen(gy[oy * ow + ox]) / 4.0f, share);
      for (int64_t t = 0; t < 4; ++t) gx[(2 * oy + t / 2) * w + 2 * ox + t % 2] = share;
    }
}

// f16 planes arrive as their bits; Half has the same layout.
void max_forward_f16(const uint16_t* x, uint16_t* y, uint8_t* tap, int64_t h, int64_t w) {
  max_forward(reinterpret_cast<const Half*>(x), reinterpret_cast<Half*>(y), tap, h, w);
}
void max_backward_f16(const uint16_t* gy, const uint8_t* tap, uint16_t* gx, int64_t h, int64_t w) {
  max_backward(reinterpret_cast<const Half*>(gy), tap, reinterpret_cast<Half*>(gx), h, w);
}

SimdLevelSelector g_level;

}  // namespace

const Pool2x2Kernels kPool2x2Scalar{
    max_forward<float>, max_forward<uint16_t>, max_backward<float>, max_backward<uint16_t>,
    avg_forward<float>, avg_forward<uint16_t>, avg_backward<float>, avg_backward<uint16_t>,
    max_forward_f16,    max_backward_f16};

const Pool2x2Kernels kPool2x2Avx2{pool2x2_max_forward_f32_avx2,
                                  pool2x2_max_forward_bf16_avx2,
                                  pool2x2_max_backward_f32_avx2,
                                  pool2x2_max_backward_bf16_avx2,
                                  avg_forward<float>,
                                  avg_forward<uint16_t>,
                                  avg_backward<float>,
                                  avg_backward<uint16_t>,
                                  pool2x2_max_forward_f16_avx2,
                                  pool2x2_max_backward_f16_avx2};

const Pool2x2Kernels& pool_2x2_kernels() {
  const SimdLevel level = g_level.active();
  if (level >= SimdLevel::kAvx512) return kPool2x2Avx512;
  return level == SimdLevel::kAvx2 ? kPool2x2Avx2 : kPool2x2Scalar;
}

bool force_pool_level(std::optional<SimdLevel> level) { return g_level.force(level); }

}  // namespace mantissa::kernels::cpu
