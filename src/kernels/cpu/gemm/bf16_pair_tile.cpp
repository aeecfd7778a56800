// The bf16 register tile, its probe and its panel packing (bf16_pair_tile.h).
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "kernels/cpu/gemm/bf16_pair_tile.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "kernels/cpu/common/growable_buffer.h"
#include "kernels/cpu/gemm/register_tile_avx512.h"

#define MANTISSA_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma")))

namespace mantissa::kernels {
namespace {

// The fp32 tile's body (fp32_register_tile.cpp) with one VDPBF16PS per pair of k steps.
template <int R, bool kPromote = false>
MANTISSA_BF16_TARGET void body(const uint32_t* a, int64_t lda, const uint32_t* b, int64_t ldb,
                               int64_t kp, float* acc, int64_t ldc, bool zero,
                               const float* sa = nullptr, const float* sb = nullptr,
                               bool first = false) {
  __m512 c[R][2];
  register_tile::load<R>(c, acc, ldc, zero);
  for (int64_t p = 0; p < kp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * ldb);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * ldb + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * lda + p]));
      c[r][0] = _mm512_dpbf16_ps(c[r][0], av, b0);
      c[r][1] = _mm512_dpbf16_ps(c[r][1], av, b1);
    }
  }
  if constexpr (kPromote)
    register_tile::promote<R>(c, sa, sb, acc, ldc, first);
  else
    register_tile::store<R>(c, acc, ldc);
}

MANTISSA_BF16_TARGET void tile(const uint32_t* a, int64_t lda, const uint32_t* b, int64_t ldb,
                               int64_t kp, float* acc, int64_t ldc, bool zero) {
  body<8>(a, lda, b, ldb, kp, acc, ldc, zero);
}
MANTISSA_BF16_TARGET void promote(const uint32_t* a, int64_t lda, const uint32_t* b, int64_t ldb,
                                  int64_t kp, const float* sa, const float* sb, float* out,
                                  int64_t ldo, bool first) {
  body<8, true>(a, lda, b, ldb, kp, out, ldo, true, sa, sb, first);
}

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }
float value(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t pair(float k, float k1) { return (bits(k) & 0xFFFF0000u) | (bits(k1) >> 16); }

// One case of the probe: acc, then the products a0 * b0 (step k) and a1 * b1 (step k + 1), all
// of them bf16 values but acc.
struct Case {
  float acc, a0, b0, a1, b1;
};

MANTISSA_BF16_TARGET bool probe_cases(const std::vector<Case>& cases) {
  for (size_t i0 = 0; i0 < cases.size(); i0 += 16) {
    alignas(64) float acc[16] = {}, want[16] = {}, got[16];
    alignas(64) uint32_t a[16] = {}, b[16] = {};
    const size_t n = std::min<size_t>(16, cases.size() - i0);
    for (size_t j = 0; j < n; ++j) {
      const Case& c = cases[i0 + j];
      acc[j] = c.acc;
      a[j] = pair(c.a0, c.a1);
      b[j] = pair(c.b0, c.b1);
      want[j] = std::fma(c.a1, c.b1, std::fma(c.a0, c.b0, c.acc));
    }
    _mm512_store_ps(got, _mm512_dpbf16_ps(_mm512_load_ps(acc), (__m512bh)_mm512_load_si512(a),
                                          (__m512bh)_mm512_load_si512(b)));
    for (size_t j = 0; j < n; ++j)
      if (bits(got[j]) != bits(want[j])) return false;
  }
  return true;
}

bool run_probe() {
  if (!cpu_features().avx512_bf16) return false;
  const float e24 = std::ldexp(1.0f, -24), e30 = std::ldexp(1.0f, -30);
  std::vector<Case> cases = {
      {1.0f, 1.0f, e24, 1.0f, e24},                    // two ties to even, not one sum
      {1.0f, -1.0f, 1.0f, 1.0f, e30},                  // cancellation first, then the small one
      {1.0f, 1.0f, e30, -1.0f, 1.0f},                  // the small one lost, then cancellation
      {16777216.0f, 1.0f, 1.0f, 1.0f, 1.0f},           // 2^24 + 1 + 1: two ties
      {1.5f, 3.0f, std::ldexp(1.0f, -25), 1.0f, e24},  // above a tie, then a tie
      {std::ldexp(1.0f, 100), 1.0f, 1.0f, -1.0f, std::ldexp(1.0f, 100)},  // large and small
      {-0.0f, 1.0f, -0.0f, -0.0f, 0.0f},  // signed zeros with the padding pair
      {0.0f, -1.0f, 0.0f, -0.0f, 0.0f},
      {-0.0f, 0.0f, 0.0f, -0.0f, 0.0f},
      {-0.0f, -0.0f, 0.0f, -0.0f, 0.0f},
      {3.0f, -1.5f, 2.0f, -0.0f, 0.0f},  // an exact zero sum, then the padding
      {std::ldexp(1.0f, -100), std::ldexp(1.0f, -13), std::ldexp(1.0f, -13), 1.0f, -e24},
  };
  // Random bf16 products over a range of magnitudes, accumulators near their sums.
  uint64_t s = 0x9E3779B97F4A7C15ull;
  auto next = [&s] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(s >> 32);
  };
  auto random_bf16 = [&](int range) {
    const uint32_t r = next();
    const int e = static_cast<int>(r % (2 * range + 1)) - range;
    const float m = value(0x3F800000u | ((r >> 8) & 0x7F) << 16);  // 1.xxxxxxx
    return (r >> 20 & 1 ? -1.0f : 1.0f) * std::ldexp(m, e);
  };
  for (int i = 0; i < 4096; ++i) {
    Case c{0.0f, random_bf16(20), random_bf16(20), random_bf16(20), random_bf16(20)};
    const uint32_t pick = next() % 4;
    if (pick == 0)
      c.acc = value(bits(-c.a0 * c.b0) ^ (next() & 0xFF));
    else if (pick == 1)
      c.acc = value(bits(-c.a1 * c.b1) ^ (next() & 0xFFFF));
    else
      c.acc = random_bf16(40) * (1.0f + static_cast<float>(next() & 0xFFFF) * 0x1p-17f);
    cases.push_back(c);
  }
  return probe_cases(cases);
}

// Lanes of v that are neither a bf16 normal number nor zero: a nonzero low half, an exponent
// of all ones (inf, NaN) or zero under a nonzero fraction (subnormal).
MANTISSA_BF16_TARGET inline __mmask16 not_bf16_normal(__m512i v) {
  const __m512i exp_mask = _mm512_set1_epi32(0x7F800000);
  const __m512i e = _mm512_and_si512(v, exp_mask);
  const __mmask16 low = _mm512_test_epi32_mask(v, _mm512_set1_epi32(0xFFFF));
  const __mmask16 top = _mm512_cmpeq_epi32_mask(e, exp_mask);
  const __mmask16 sub = _mm512_mask_test_epi32_mask(
      _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()), v, _mm512_set1_epi32(0x7FFFFFFF));
  return low | top | sub;
}

}  // namespace

bool bf16_pair_dot_matches_fma() {
  static const bool ok = run_probe();
  return ok;
}

const Bf16PairTile* bf16_pair_tile(SimdLevel level) {
  static const Bf16PairTile t{8, 32, tile, promote};
  if (std::min(level, simd_level()) < SimdLevel::kAvx512Bf16) return nullptr;
  return bf16_pair_dot_matches_fma() ? &t : nullptr;
}

uint32_t* pair_panel_buffer(int slot, int64_t words) {
  thread_local GrowableBuffer buffers[kPairPanelSlots];
  return static_cast<uint32_t*>(
      buffers[slot].get(static_cast<size_t>(words) * sizeof(uint32_t), "bf16 register tile"));
}

MANTISSA_BF16_TARGET bool pack_pair_rows(const float* src, int64_t lds, int64_t rows, int64_t kl,
                                         uint32_t* dst, int64_t ldd) {
  // Word 2p of the result is the high half of float 2p + 1 (its word 4p + 3 of the two
  // registers), word 2p + 1 that of float 2p (word 4p + 1).
  alignas(64) static constexpr uint16_t kIdx[32] = {3,  1,  7,  5,  11, 9,  15, 13, 19, 17, 23,
                                                    21, 27, 25, 31, 29, 35, 33, 39, 37, 43, 41,
                                                    47, 45, 51, 49, 55, 53, 59, 57, 63, 61};
  const __m512i idx = _mm512_load_si512(kIdx);
  const __m512 pad = _mm512_set1_ps(-0.0f);
  __mmask16 bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * lds;
    uint32_t* d = dst + r * ldd;
    int64_t k = 0;
    for (; k + 32 <= kl; k += 32) {
      const __m512i v0 = _mm512_castps_si512(_mm512_loadu_ps(s + k));
      const __m512i v1 = _mm512_castps_si512(_mm512_loadu_ps(s + k + 16));
      bad |= not_bf16_normal(v0) | not_bf16_normal(v1);
      _mm512_storeu_si512(d + k / 2, _mm512_permutex2var_epi16(v0, idx, v1));
    }
    if (k < kl) {
      const int64_t n = kl - k;  // 1..31
      const __mmask16 m0 = static_cast<__mmask16>((1u << std::min<int64_t>(n, 16)) - 1);
      const __mmask16 m1 = static_cast<__mmask16>(n > 16 ? (1u << (n - 16)) - 1 : 0);
      const __m512i v0 = _mm512_castps_si512(_mm512_mask_loadu_ps(pad, m0, s + k));
      const __m512i v1 = _mm512_castps_si512(_mm512_mask_loadu_ps(pad, m1, s + k + 16));
      bad |= not_bf16_normal(v0) | not_bf16_normal(v1);
      const __mmask16 out = static_cast<__mmask16>((1u << ((n + 1) / 2)) - 1);
      _mm512_mask_storeu_epi32(d + k / 2, out, _mm512_permutex2var_epi16(v0, idx, v1));
    }
  }
  return bad == 0;
}

MANTISSA_BF16_TARGET bool pack_pair_strip(const float* src, int64_t cols, int64_t valid, int64_t kl,
                                          uint32_t* dst) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  __mmask16 bad = 0;
  for (int64_t k = 0; k < kl; k += 2) {
    const float* s0 = src + k * cols;
    uint32_t* d = dst + k / 2 * cols;
    for (int64_t c = 0; c < cols; c += 16) {
      const int64_t v = std::clamp<int64_t>(valid - c, 0, 16);
      const auto check = static_cast<__mmask16>((1u << v) - 1);
      const __m512i v0 = _mm512_castps_si512(_mm512_loadu_ps(s0 + c));
      const __m512i v1 =
          k + 1 < kl ? _mm512_castps_si512(_mm512_loadu_ps(s0 + cols + c)) : _mm512_setzero_si512();
      bad |= check & (not_bf16_normal(v0) | not_bf16_normal(v1));
      _mm512_storeu_si512(d + c,
                          _mm512_or_si512(_mm512_and_si512(v0, high), _mm512_srli_epi32(v1, 16)));
    }
  }
  return bad == 0;
}

}  // namespace mantissa::kernels
