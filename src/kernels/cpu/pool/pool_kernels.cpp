// Scalar level of the 2x2 pools and the run-time choice of level.
#include "kernels/cpu/pool/pool_kernels.h"

#include <cstring>

#include "core/simd_dispatch.h"
#include "mantissa/core/bfloat16.h"

namespace mantissa::kernels::cpu {
namespace {

float widen(float v) { return v; }
float widen(uint16_t v) {
  const uint32_t bits = uint32_t{v} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
// One RNE rounding, as BFloat16(float) (exact for max values and max gradients).
void narrow(float v, float& out) { out = v; }
void narrow(float v, uint16_t& out) { out = BFloat16(v).x; }

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

SimdLevelSelector g_level;

}  // namespace

const Pool2x2Kernels kPool2x2Scalar{
    max_forward<float>, max_forward<uint16_t>, max_backward<float>, max_backward<uint16_t>,
    avg_forward<float>, avg_forward<uint16_t>, avg_backward<float>, avg_backward<uint16_t>};

const Pool2x2Kernels& pool_2x2_kernels() {
  // No AVX2 kernels: AVX2 runs the scalar ones.
  return g_level.active() >= SimdLevel::kAvx512 ? kPool2x2Avx512 : kPool2x2Scalar;
}

bool force_pool_level(std::optional<SimdLevel> level) { return g_level.force(level); }

}  // namespace mantissa::kernels::cpu
