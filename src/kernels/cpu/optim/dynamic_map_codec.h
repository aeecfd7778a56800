#pragma once
// A gather-free description of bitsandbytes' dynamic maps (docs/numerics.md, "Gather-free
// dynamic-map codes"), so the 8-bit Adam kernels can encode codes with register arithmetic
// instead of table searches (a gather of eight lanes costs ~19 cycles on Zen 3, more than the
// whole fp32 update). The decoding closed form is what build() checks the map against (the
// encoder's regions rest on it); the kernels decode by table lookups.
//
// Decoding. create_dynamic_map builds decade d (d = 0..6, scale S_d = 10^(d-6)) from
// torch.linspace(0.1, 1, n + 1) with n = 2^d entries (signed map) or 2^(d+1) (unsigned): the
// entry k is S_d * ((b(k) + b(k+1)) / 2), where torch's linspace computes b(i) = fma(step, i,
// 0.1) for i < n/2 and fma(-step, n - i, 1) = fma(step, i, 1 - 0.9f) above, step = 0.9f / n
// (0.9f = 1 - 0.1f, exact division by a power of two). From the code alone: j = |q - 127|
// (signed) or q + 1 (unsigned) has p2 = 2^floor(log2 j) = n and k = j - p2. The slot of the
// constants (step, S) is the float exponent of j.
//
// Encoding. The index of the nearest entry (ties to the lower index) is the number C(a) of
// midpoints below a = |x| among the positive entries, plus sign handling. The positive line is
// cut into 8 regions at midpoints (region 0: zero and decade 0, 1..6: decades 1..6, 7: the entry
// 1.0). A region's midpoints are evenly spaced up to rounding, so T = fma(a, A, -B) with the
// region's A, B lands in [k, k + eps) at the region's k-th midpoint; min(floor(T), cap) is then C
// wherever frac(T) >= eps (cap: the region's last index, which T passes beyond the region's last
// inner midpoint; the AVX2 kernel applies it to the packed bytes, 32 at a time). Lanes with frac(T)
// < eps (about eps of all values) take the exact table path instead. |x| beyond 1, infinities and
// NaN are first clamped to 1.0 (bits as integers; the unsigned map also raises a negative x to +0):
// that is the exact table's answer for them too (its last bin holds 1.0 and everything above; no
// unsigned midpoint lies below +0). T >= 0 wherever the fast path is used (build() checks it at
// every region's lowest value), so the truncating conversion gives floor(T): one CVTTPS2DQ for the
// count, and its conversion back for the fraction, in place of a rounding instruction. The region
// itself comes from a 16-entry table (a byte shuffle) indexed by the top 7 bits of a's exponent,
// whose two binades (0.6 decades) hold at most one region edge, and one compare with the next
// region's edge.
//
// build() derives every constant from the 256 map values and checks the result against the
// map exhaustively where it matters: all 256 decoded codes, every midpoint and its float
// neighbours for the encoder, every region edge for the region guess. `exact` is false when
// any check fails (another map); the kernels then use the tables.
#include <cstdint>

namespace mantissa::kernels::optim {

struct DynamicMapCodec {
  bool exact = false;
  bool is_signed = false;

  // Decoder: constants by slot (the float exponent of j, biased so that j = 1 is slot 1 for the
  // signed map and j = 2 is slot 1 for the unsigned one; slot 0 decodes to +0, 1.0 is blended in).
  float dec_step[8] = {};
  float dec_scale[8] = {};  // S_d / 2
  float c_lo = 0.0f;        // linspace start: 0.1f
  float c_hi = 0.0f;        // 1 - 0.9f, the constant of the upper half's fma

  // Encoder.
  float eps = 0.0f;  // frac(T) < eps: take the exact path
  // Region guess r0 = guess[(bits(a) >> 24) - kGuessBase], 0 where that is negative (a below
  // 2^-29): the region of the bucket's lowest value. a <= 1 keeps the index below 16.
  static constexpr int kGuessBase = 48;
  uint8_t guess[16] = {};
  int32_t next_threshold[8] = {};  // bits of region r+1's lower edge (r = 7: INT32_MAX)
  // T = fma(a, A, -B); the count is min(trunc(T), cap), cap = the region's last index: past the
  // region's last inner midpoint T overshoots (the next decade's entries are 10x as far apart).
  float enc_a[8] = {}, enc_b[8] = {};
  int32_t enc_cap[8] = {};

  // Fills the constants for `code` (256 sorted floats; signed: symmetric around index 127 with
  // 1.0 at 255; unsigned: 0 at index 0, 1.0 at 255) and sets `exact`.
  void build(const float* code, bool is_signed_map);

  // Scalar models of the AVX2 lane arithmetic (same operations, same order), used by build()'s
  // checks and the tests. decode() is code[q]. encode_fast() returns false where the lane takes
  // the exact path, else sets *index to the nearest entry's index; for the signed map including
  // the 8-bit Adam sign fix (a negative x, -0 included, never gets the +0 entry: it moves to
  // 126), which equals the fix on m because x = m * (1 / absmax) keeps m's sign.
  float decode(uint8_t q) const;
  bool encode_fast(float x, int* index) const;
  int region_guess(float a) const;  // r0: the region or the one below (0 <= a <= 1)
  int region_of(float a) const;
  float region_t(float a, int region) const;
};

// The codecs of the built-in signed and unsigned dynamic maps (built once).
const DynamicMapCodec& dynamic_codec_signed();
const DynamicMapCodec& dynamic_codec_unsigned();

}  // namespace mantissa::kernels::optim
