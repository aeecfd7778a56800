// Scalar level of the 2x2 max pool and the run-time choice of level.
#include "kernels/cpu/pool_kernels.h"

#include <cstring>

#include "mantissa/core/bfloat16.h"
#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels::cpu {
namespace {

float widen(float v) { return v; }
float widen(uint16_t v) {
  const uint32_t bits = uint32_t{v} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
// Exact for the values these kernels store: inputs (max) and gradients (0 + g is g or +0).
void narrow(float v, float& out) { out = v; }
void narrow(float v, uint16_t& out) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  out = static_cast<uint16_t>(bits >> 16);
}

template <typename T>
void forward(const T* x, T* y, uint8_t* tap, int64_t h, int64_t w) {
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
void backward(const T* gy, const uint8_t* tap, T* gx, int64_t h, int64_t w) {
  const int64_t oh = h / 2, ow = w / 2;
  for (int64_t i = 0; i < h * w; ++i) narrow(0.0f, gx[i]);
  for (int64_t oy = 0; oy < oh; ++oy)
    for (int64_t ox = 0; ox < ow; ++ox) {
      const uint8_t t = tap[oy * ow + ox];
      narrow(0.0f + widen(gy[oy * ow + ox]), gx[(2 * oy + t / 2) * w + 2 * ox + t % 2]);
    }
}

PoolLevel detect_level() {
  const CpuFeatures& f = cpu_features();
  return f.avx512f && f.avx512bw && f.avx512vl ? PoolLevel::kAvx512 : PoolLevel::kScalar;
}

PoolLevel& active_level() {
  static PoolLevel level = detect_level();
  return level;
}

}  // namespace

const MaxPool2x2Kernels kMaxPool2x2Scalar{forward<float>, forward<uint16_t>, backward<float>,
                                          backward<uint16_t>};

PoolLevel max_pool_level() { return detect_level(); }

const MaxPool2x2Kernels& max_pool_2x2_kernels() {
  return active_level() == PoolLevel::kAvx512 ? kMaxPool2x2Avx512 : kMaxPool2x2Scalar;
}

bool force_pool_level(std::optional<PoolLevel> level) {
  const PoolLevel best = detect_level();
  if (level && *level > best) return false;
  active_level() = level.value_or(best);
  return true;
}

}  // namespace mantissa::kernels::cpu
