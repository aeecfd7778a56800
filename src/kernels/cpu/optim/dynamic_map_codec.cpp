// Builds and checks the gather-free dynamic-map codec (dynamic_map_codec.h). Built for the
// portable baseline: std::fma is the correctly rounded fused multiply-add the AVX2 kernel's
// _mm256_fmadd_ps computes, and nothing else here may be contracted (CMakeLists.txt builds this
// file with -ffp-contract=off).
#include "kernels/cpu/optim/dynamic_map_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/quant/blockwise_dynamic.h"

namespace mantissa::kernels::optim {
namespace {

constexpr int kRegions = 8;
constexpr int kDecades = 7;

float from_bits(uint32_t b) { return std::bit_cast<float>(b); }
uint32_t to_bits(float f) { return std::bit_cast<uint32_t>(f); }

// The float above a >= 0.
float next_up(float a) { return from_bits(to_bits(a) + 1); }

}  // namespace

float DynamicMapCodec::decode(uint8_t q) const {
  if (q == 255) return 1.0f;
  const int j = is_signed ? std::abs(static_cast<int>(q) - 127) : static_cast<int>(q) + 1;
  const float fj = static_cast<float>(j);
  const uint32_t bits = to_bits(fj);
  const float p2 = from_bits(bits & 0xff800000u);
  const float k0 = fj - p2;
  const int e = static_cast<int>(bits >> 23);
  const int slot = (is_signed ? std::max(e - 126, 0) : e - 127) & 7;
  const float half = p2 * 0.5f;
  const float k1 = k0 + 1.0f;
  const float b0 = std::fma(dec_step[slot], k0, k0 < half ? c_lo : c_hi);
  const float b1 = std::fma(dec_step[slot], k1, k1 < half ? c_lo : c_hi);
  // dec_scale holds S_d / 2: (b0 + b1) * 0.5 is exact, so one rounding of the product either way.
  float v = (b0 + b1) * dec_scale[slot];
  if (is_signed && q < 127) v = from_bits(to_bits(v) | 0x80000000u);
  return v;
}

int DynamicMapCodec::region_guess(float a) const {
  // PSHUFB: an index byte with its top bit set (a below 2^-29) reads 0, others their low 4 bits.
  const int k = static_cast<int>(to_bits(a) >> 24) - kGuessBase;
  return k < 0 ? 0 : guess[k & 15];
}

int DynamicMapCodec::region_of(float a) const {
  const int r0 = region_guess(a);
  return r0 + (static_cast<int32_t>(to_bits(a)) > next_threshold[r0] ? 1 : 0);
}

float DynamicMapCodec::region_t(float a, int region) const {
  return std::fma(a, enc_a[region], -enc_b[region]);
}

bool DynamicMapCodec::encode_fast(float x, int* index) const {
  const uint32_t bits = to_bits(x);
  // |x| (signed) or max(x, +0) (unsigned), at most 1.0, compared as int32 (PMAXSD, PMINSD): the
  // exact answer for |x| > 1, infinities and NaN is that of +-1.0, and for a negative x in the
  // unsigned map that of +0.
  const int32_t sbits = static_cast<int32_t>(bits);
  const int32_t abits =
      std::min(is_signed ? sbits & 0x7fffffff : std::max(sbits, 0), int32_t{0x3f800000});
  const float a = from_bits(static_cast<uint32_t>(abits));
  // A signed x on a region edge: -edge has one entry fewer below it than the clamped top of the
  // region below gives (the count there is of midpoints <= a, not < a).
  if (is_signed && abits == next_threshold[region_guess(a)]) return false;
  const int r = region_of(a);
  const float t = region_t(a, r);
  // Truncation (CVTTPS2DQ): floor(t) where the fast path is used (0 <= t < 256 there, checked by
  // build()); a t < 0 has t - trunc(t) <= 0 and is left to the exact path anyway.
  int c = static_cast<int>(t);
  if (t - static_cast<float>(c) < eps) return false;
  c = std::min(c, enc_cap[r]);
  if (!is_signed) {
    *index = c;
  } else {
    // The AVX2 kernel computes this on the packed bytes: 127 + c, or 127 - max(c, 1) with
    // unsigned saturation (c = 128, the entry 1.0, gives 0 on the negative side).
    *index = (bits >> 31) ? 127 - std::clamp(c, 1, 127) : 127 + c;
  }
  return true;
}

void DynamicMapCodec::build(const float* code, bool is_signed_map) {
  *this = DynamicMapCodec{};
  is_signed = is_signed_map;
  exact = false;

  // The positive entries in order: 0, decades 0..6, 1.0; decade d holds n_d entries.
  std::vector<float> pos;
  if (is_signed) {
    for (int i = 127; i < 256; ++i) pos.push_back(code[i]);
    for (int i = 0; i < 127; ++i)
      if (to_bits(code[i]) != (to_bits(code[254 - i]) | 0x80000000u)) return;
  } else {
    for (int i = 0; i < 256; ++i) pos.push_back(code[i]);
  }
  if (to_bits(pos.front()) != 0 || pos.back() != 1.0f) return;
  const int per_decade_shift = is_signed ? 0 : 1;  // n_d = 2^(d + shift)

  // Decoder constants: slot 1 + d is decade d.
  c_lo = 0.1f;
  c_hi = 1.0f - (1.0f - 0.1f);  // exact: 1 - 0.9f is a multiple of 2^-24 below 0.125
  const float span = 1.0f - 0.1f;
  for (int d = 0; d < kDecades; ++d) {
    dec_step[1 + d] = span / static_cast<float>(1 << (d + per_decade_shift));
    dec_scale[1 + d] = static_cast<float>(std::pow(10.0, d - 6)) * 0.5f;
  }
  for (int q = 0; q < 256; ++q)
    if (to_bits(decode(static_cast<uint8_t>(q))) != to_bits(code[q])) return;

  // Midpoints: mid[i] (i = 1..N) lies between pos[i-1] and pos[i]; C(a) = #{i: mid[i] < a}.
  const int n_pos = static_cast<int>(pos.size()) - 1;  // N
  std::vector<float> mid(static_cast<size_t>(n_pos) + 1, 0.0f);
  for (int i = 1; i <= n_pos; ++i) mid[i] = 0.5f * (pos[i - 1] + pos[i]);

  // Regions: entries [first[r], first[r] + count[r]) of pos.
  int first[kRegions], count[kRegions];
  first[0] = 0;
  count[0] = 1 + (1 << per_decade_shift);
  for (int d = 1; d < kDecades; ++d) {
    first[d] = first[d - 1] + count[d - 1];
    count[d] = 1 << (d + per_decade_shift);
  }
  first[7] = first[6] + count[6];
  count[7] = 1;
  if (first[7] != n_pos) return;

  for (int r = 0; r < kRegions; ++r)
    next_threshold[r] = r + 1 < kRegions ? static_cast<int32_t>(to_bits(mid[first[r + 1]]))
                                         : std::numeric_limits<int32_t>::max();
  // Region guess: the region of each exponent bucket's lowest value (bucket 0 from +0).
  for (int j = 0; j < 16; ++j) {
    const uint32_t lo = j == 0 ? 0u : static_cast<uint32_t>(j + kGuessBase) << 24;
    int r = 0;
    while (r + 1 < kRegions && static_cast<int32_t>(lo) > next_threshold[r]) ++r;
    guess[j] = static_cast<uint8_t>(r);
  }

  // Affine T per region: through the first and last inner midpoint (T = index), or with the
  // region's lower edge at first + 0.5 when it has one inner midpoint, or constant.
  for (int r = 0; r < kRegions; ++r) {
    const int s = first[r], n = count[r];
    double a = 0.0, b = -(s + 0.5);
    if (n >= 2) {
      double x1, y1;
      if (n == 2) {
        x1 = r == 0 ? 0.0 : mid[s];
        y1 = s + 0.5;
      } else {
        x1 = mid[s + 1];
        y1 = s + 1;
      }
      const double x2 = mid[s + n - 1], y2 = s + n - 1;
      a = (y2 - y1) / (x2 - x1);
      b = a * x1 - y1;
    }
    enc_a[r] = static_cast<float>(a);
    enc_b[r] = static_cast<float>(b);
    enc_cap[r] = s + n - 1;
  }
  float centered_b[kRegions];
  std::copy(enc_b, enc_b + kRegions, centered_b);

  // Checks. The guess is monotone in a (nondecreasing table, buckets in order), so region edges
  // suffice for it (up to 1.0, where a is clamped); T is monotone within a region, so each
  // midpoint's T lying in [k, k + eps) makes every other value in the region either land on its
  // true count or be flagged, and the midpoint itself flagged. The lowest value's T >= first[r]
  // makes T >= 0 on the whole region, where truncation is floor.
  if (guess[0] != 0) return;
  for (int j = 1; j < 16; ++j)
    if (guess[j] < guess[j - 1]) return;
  for (int r = 0; r < kRegions; ++r) {
    const float lo = r == 0 ? 0.0f : next_up(mid[first[r]]);
    const float hi = r + 1 < kRegions ? mid[first[r + 1]] : 1.0f;
    if (region_of(lo) != r || region_of(hi) != r) return;
  }
  // T is shifted up by eps / 2 so that one comparison, frac(T) < eps, flags the band
  // [k - eps/2, k + eps/2) of the unshifted T around every integer k.
  for (float e = 0x1p-13f; e <= 0x1p-5f; e *= 2.0f) {
    eps = e;
    for (int r = 0; r < kRegions; ++r)
      enc_b[r] = static_cast<float>(static_cast<double>(centered_b[r]) - e / 2);
    bool ok = true;
    for (int r = 0; r < kRegions && ok; ++r) {
      const int s = first[r], n = count[r];
      const float lo = r == 0 ? 0.0f : next_up(mid[s]);
      const float hi = r + 1 < kRegions ? mid[first[r + 1]] : 1.0f;
      // T in [first[r], 256) over the region: the truncation is floor and no pack saturates.
      if (!(region_t(lo, r) >= static_cast<float>(s) && region_t(hi, r) < 256.0f)) ok = false;
      // T being monotone, the midpoints' T >= i also keep T >= the region's last index past its
      // last inner midpoint (from the lowest value when it has none), where the cap gives it.
      for (int i = s + 1; i < s + n && ok; ++i) {
        const float t = region_t(mid[i], r);
        if (!(t >= static_cast<float>(i) && t < static_cast<float>(i) + eps)) ok = false;
      }
    }
    if (ok) {
      exact = true;
      return;
    }
  }
}

const DynamicMapCodec& dynamic_codec_signed() {
  static const DynamicMapCodec codec = [] {
    DynamicMapCodec c;
    c.build(quant::dynamic_map_signed(), true);
    return c;
  }();
  return codec;
}

const DynamicMapCodec& dynamic_codec_unsigned() {
  static const DynamicMapCodec codec = [] {
    DynamicMapCodec c;
    c.build(quant::dynamic_map_unsigned(), false);
    return c;
  }();
  return codec;
}

}  // namespace mantissa::kernels::optim
