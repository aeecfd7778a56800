// Scalar 8-bit Adam kernels and the level dispatch (adam8bit_kernels.h). Built for the portable
// x86-64 baseline, which has no FMA, so every product and sum rounds on its own as the AVX2
// version's do.
#include "kernels/cpu/optim/adam8bit_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "kernels/cpu/quant/blockwise_dynamic.h"

namespace mantissa::kernels::optim {

namespace {

// A table of `code`'s (index table, byte planes, word planes), built once by its caller.
template <typename Table>
Table built_from(const float* code) {
  Table t;
  t.build(code);
  return t;
}

}  // namespace

const Adam8bitMaps& dynamic_adam8bit_maps() {
  const float* signed_map = quant::dynamic_map_signed();
  const float* unsigned_map = quant::dynamic_map_unsigned();
  static const auto index1 = built_from<quant::CodeIndexTable>(signed_map);
  static const auto index2 = built_from<quant::CodeIndexTable>(unsigned_map);
  static const auto planes1 = built_from<CodeBytePlanes>(signed_map);
  static const auto planes2 = built_from<CodeBytePlanes>(unsigned_map);
  static const auto words1 = built_from<CodeWordPlanes>(signed_map);
  static const auto words2 = built_from<CodeWordPlanes>(unsigned_map);
  static const Adam8bitMaps maps{quant::dynamic_map_signed(),
                                 quant::dynamic_map_unsigned(),
                                 &index1,
                                 &index2,
                                 127,
                                 0,
                                 127,
                                 &dynamic_codec_signed(),
                                 &dynamic_codec_unsigned(),
                                 &planes1,
                                 &planes2,
                                 &words1,
                                 &words2};
  return maps;
}

void CodeWordPlanes::build(const float* code) {
  for (int i = 0; i < 256; ++i) {
    const uint32_t b = std::bit_cast<uint32_t>(code[i]);
    lo[i] = static_cast<uint16_t>(b);
    hi[i] = static_cast<uint16_t>(b >> 16);
  }
}

void CodeBytePlanes::build(const float* code) {
  for (int i = 0; i < 256; ++i) {
    const uint32_t b = std::bit_cast<uint32_t>(code[i]);
    for (int k = 0; k < 4; ++k) plane[k][i] = static_cast<uint8_t>(b >> (8 * k));
  }
}

namespace {

inline uint8_t nearest(const quant::CodeIndexTable& table, const float* code, float x) {
  return table.exact ? table.index(x) : quant::nearest_code_index(code, x);
}

}  // namespace

void adam8bit_encode_scalar(const Adam8bitMaps& maps, bool first_moment, const float* values,
                            float inv, uint8_t* codes, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = values[i];
    if (!first_moment) {
      codes[i] = nearest(*maps.index2, maps.code2, x * inv);
      continue;
    }
    int q = nearest(*maps.index1, maps.code1, x * inv);
    if ((q < maps.nonnegative_from1) != std::signbit(x)) q += x > 0.0f ? 1 : -1;
    codes[i] = static_cast<uint8_t>(q);
  }
}

void adam8bit_update_scalar(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                            const float* g, const uint8_t* q1, const uint8_t* q2, float a1,
                            float a2, float* m, float* v, int64_t from, int64_t n, float* new_a1,
                            float* new_a2) {
  for (int64_t i = from; i < n; ++i) {
    const float gi = g[i];
    const float mi = maps.code1[q1[i]] * a1 * s.beta1 + s.one_minus_beta1 * gi;
    const float vi = maps.code2[q2[i]] * a2 * s.beta2 + s.one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    *new_a1 = std::max(*new_a1, std::fabs(mi));
    *new_a2 = std::max(*new_a2, std::fabs(vi));
    float pi = p[i] + s.step_size * (mi / (std::sqrt(vi) + s.eps_scaled));
    if (s.apply_decay) pi = pi * s.decay;
    p[i] = pi;
  }
}

void adam8bit_block_scalar(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                           const float* g, uint8_t* q1, uint8_t* q2, float* absmax1, float* absmax2,
                           int64_t n) {
  if (n <= 0) return;
  float m[kAdam8bitBlockSize];
  float v[kAdam8bitBlockSize];
  const float a1 = *absmax1, a2 = *absmax2;
  float new_a1 = 0.0f, new_a2 = 0.0f;
  adam8bit_update_scalar(s, maps, p, g, q1, q2, a1, a2, m, v, 0, n, &new_a1, &new_a2);
  *absmax1 = new_a1;
  *absmax2 = new_a2;
  if (new_a1 == 0.0f)
    std::fill(q1, q1 + n, maps.zero_index1);
  else
    adam8bit_encode_scalar(maps, true, m, 1.0f / new_a1, q1, n);
  if (new_a2 == 0.0f)
    std::fill(q2, q2 + n, maps.zero_index2);
  else
    adam8bit_encode_scalar(maps, false, v, 1.0f / new_a2, q2, n);
}

void adam8bit_blocks_scalar(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                            const float* g, uint8_t* q1, uint8_t* q2, float* absmax1,
                            float* absmax2, int64_t n) {
  for (int64_t b = 0; b * kAdam8bitBlockSize < n; ++b) {
    const int64_t off = b * kAdam8bitBlockSize;
    adam8bit_block_scalar(s, maps, p + off, g + off, q1 + off, q2 + off, absmax1 + b, absmax2 + b,
                          std::min(kAdam8bitBlockSize, n - off));
  }
}

void adam32_span_scalar(const Adam8bitScalars& s, float* p, const float* g, float* m, float* v,
                        int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = m[i] * s.beta1 + s.one_minus_beta1 * gi;
    const float vi = v[i] * s.beta2 + s.one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float pi = p[i] + s.step_size * (mi / (std::sqrt(vi) + s.eps_scaled));
    if (s.apply_decay) pi = pi * s.decay;
    p[i] = pi;
  }
}

bool any_non_finite_scalar(const float* g, int64_t n) {
  bool bad = false;
  for (int64_t i = 0; i < n; ++i) bad |= !(std::fabs(g[i]) <= std::numeric_limits<float>::max());
  return bad;
}

AnyNonFiniteFn any_non_finite_kernel(SimdLevel level) {
  if (level >= SimdLevel::kAvx512) return &any_non_finite_avx512;
  return level >= SimdLevel::kAvx2 ? &any_non_finite_avx2 : &any_non_finite_scalar;
}

Adam8bitBlockFn adam8bit_block_kernel(SimdLevel level) {
  if (level >= SimdLevel::kAvx512)
    return cpu_features().avx512_vbmi ? &adam8bit_block_avx512_vbmi : &adam8bit_block_avx512;
  return level >= SimdLevel::kAvx2 ? &adam8bit_block_avx2 : &adam8bit_block_scalar;
}

Adam8bitBlocksFn adam8bit_blocks_kernel(SimdLevel level) {
  if (level >= SimdLevel::kAvx512)
    return cpu_features().avx512_vbmi ? &adam8bit_blocks_avx512_vbmi : &adam8bit_blocks_avx512;
  return level >= SimdLevel::kAvx2 ? &adam8bit_blocks_avx2 : &adam8bit_blocks_scalar;
}

Adam32SpanFn adam32_span_kernel(SimdLevel level) {
  return level >= SimdLevel::kAvx2 ? &adam32_span_avx2 : &adam32_span_scalar;
}

}  // namespace mantissa::kernels::optim
