#pragma once
// FP8 cast kernels for delayed scaling (docs/fp8.md "What runs on the CPU"): one pass over a
// float32/bfloat16/float16 buffer that multiplies by the scale, rounds to E4M3 or E5M2 with
// TransformerEngine's saturating RNE conversion (NaN -> 0x7F, overflow and inf -> ±max), and
// reduces the amax of the unscaled input; and the way back, code * scale_inv into float32 or
// bfloat16. Every SIMD level gives the scalar path's bits.
#include <cstdint>

#include "mantissa/core/cpu_features.h"
#include "mantissa/core/dtype.h"

namespace mantissa::kernels::fp8 {

struct CastStats {
  float amax = 0.0f;      // max |x| over the input, NaN ignored (fmaxf from 0), inf kept
  int64_t saturated = 0;  // elements with |f32(x * scale)| > the format's max (clamped)
  int64_t flushed = 0;    // nonzero, non-NaN elements whose code is ±0
};

// dst[i] = satfinite_rne_fp8(f32(src[i] * scale)). src_dtype: float32, bfloat16 or float16;
// fp8: float8_e4m3fn or float8_e5m2. Runs on `level` (clamped to what the CPU has).
CastStats scaled_cast(const void* src, DType src_dtype, uint8_t* dst, int64_t n, float scale,
                      DType fp8, SimdLevel level = simd_level());

// scaled_cast that also writes widened[i] = the bfloat16 bits of code dst[i]'s value (scale_inv
// not applied; exact, every FP8 value is a bf16 value), as dequantize(dst, ..., kBFloat16, 1)
// would: each chunk is widened while its codes are still in cache, so the codes are not read
// back from memory by a second pass.
CastStats scaled_cast_widened(const void* src, DType src_dtype, uint8_t* dst, uint16_t* widened,
                              int64_t n, float scale, DType fp8, SimdLevel level = simd_level());

// The casts of a row-major [rows, cols] matrix whose columns have scales of their own (the
// rowwise recipes' copies scaled along the other dimension): dst[r * cols + c] =
// satfinite_rne_fp8(f32(src[r * cols + c] * col_scale[c])), with the statistics of scaled_cast
// (amax of the unscaled values, saturated and flushed counts over the whole matrix).
CastStats scaled_cast_columns(const void* src, DType src_dtype, uint8_t* dst, int64_t rows,
                              int64_t cols, const float* col_scale, DType fp8,
                              SimdLevel level = simd_level());

// max |src[i]| over n float32/bfloat16/float16 values with NaN passed over and inf kept (as
// CastStats::amax of a cast of the same buffer), and whether a NaN was among them: the pass that
// finds a scale before the cast (the current recipe's, torchao's, whose amax is NaN then).
struct Amax {
  float amax = 0.0f;  // 0 for n == 0
  bool nan = false;
};
Amax amax(const void* src, DType src_dtype, int64_t n, SimdLevel level = simd_level());

// The same per column of a row-major [rows, cols] matrix: out[c] for column c.
void column_amax(const void* src, DType src_dtype, int64_t rows, int64_t cols, Amax* out,
                 SimdLevel level = simd_level());

// scaled_cast of a buffer whose amax pass (amax() above) has been made: `known` is that pass's
// result for the same n values, which the cast then need not take again (the returned amax is
// known.amax). The same codes and counts as scaled_cast. A bfloat16 buffer without NaN or inf
// whose products stay within the format (known.amax * scale <= its max) is cast by
// detail::Bf16TableCast (the current recipe's casts); a float32 one cast to E4M3 without NaN
// under a scale >= 1 (known.amax * scale <= 448) by rowwise_cast.h's cast_f32_scaled; any other
// by scaled_cast's bodies.
CastStats scaled_cast_after_amax(const void* src, DType src_dtype, uint8_t* dst, int64_t n,
                                 float scale, DType fp8, const Amax& known,
                                 SimdLevel level = simd_level());
// scaled_cast_after_amax that also writes scaled_cast_widened's bfloat16 copies of the codes.
CastStats scaled_cast_widened_after_amax(const void* src, DType src_dtype, uint8_t* dst,
                                         uint16_t* widened, int64_t n, float scale, DType fp8,
                                         const Amax& known, SimdLevel level = simd_level());

// dst[i] = f32(value(src[i]) * scale_inv), rounded once more (RNE) when dst_dtype is bfloat16.
// dst_dtype: float32 or bfloat16.
void dequantize(const uint8_t* src, DType fp8, void* dst, DType dst_dtype, int64_t n,
                float scale_inv, SimdLevel level = simd_level());

// The SIMD-level bodies (one range, no threading), for the dispatcher and the tests.
namespace detail {
// The codes of bfloat16 values under one scale where each product is 0 or a normal FP8 value:
// for bits h = (sign, exponent e, mantissa m), |x| * scale rounded to float32 and then to FP8 is
// 2^(e - e0) times the product of the same m at a fixed exponent e0 (scaling by a power of 2
// commutes with both roundings while every value is normal), so its code is
// (e << kMant) + T[m] (mod 256) for a table T of the 128 mantissas made once per scale. T rises
// by at most one within each group of eight m (the code's steps are more than eight m apart), so
// it is held as 16 bytes of group bases and 16 of the in-group place of the step, two byte
// shuffles. `usable` is false where that does not hold (a scale whose products overflow, a NaN or
// inf in the source, products too small for the table's reach); then scaled_cast runs instead.
struct Bf16TableCast {
  bool usable = false;
  uint16_t normal_from = 0;  // the smallest |h| (bits) whose product is a normal FP8 value
  // |h| >> 8 of normal_from: lanes whose high byte's magnitude is below it are 0 in a cast that
  // found no nonzero |h| below normal_from.
  uint8_t zero_below = 0;
  // base[g] + (m & 7 > step_after[g]) for group g = m >> 3 is T[m] less the bits of m that the
  // exponent's byte shift brings in ((m >> (7 - kMant)) & (2^kMant - 1)); step_after 7: no step.
  alignas(16) uint8_t base[16] = {};
  alignas(16) int8_t step_after[16] = {};
};
// The table of bfloat16 sources with amax `known` under `scale` (E4M3 or E5M2).
Bf16TableCast bf16_table_cast(float scale, DType fp8, const Amax& known);
// The cast by that table, 128 values a step; a step holding a nonzero |h| below normal_from, and
// the last n % 128 values, are cast by scaled_cast_avx2. `stream`: the codes bypass the caches
// (dst 32-byte aligned). The returned amax is 0 (the caller knows it).
CastStats bf16_table_cast_avx2(const uint16_t* src, uint8_t* dst, int64_t n, float scale, DType fp8,
                               const Bf16TableCast& table, bool stream);

CastStats scaled_cast_scalar(const void* src, DType src_dtype, uint8_t* dst, int64_t n, float scale,
                             DType fp8);
CastStats scaled_cast_avx2(const void* src, DType src_dtype, uint8_t* dst, int64_t n, float scale,
                           DType fp8);
void dequantize_scalar(const uint8_t* src, DType fp8, void* dst, DType dst_dtype, int64_t n,
                       float scale_inv);
void dequantize_avx2(const uint8_t* src, DType fp8, void* dst, DType dst_dtype, int64_t n,
                     float scale_inv);
// AVX-512 (F, BW, VL): levels avx512 and avx512_bf16.
CastStats scaled_cast_avx512(const void* src, DType src_dtype, uint8_t* dst, int64_t n, float scale,
                             DType fp8);
// The cast and the codes' bf16 widening in one loop (scaled_cast_widened's AVX-512 body).
CastStats scaled_cast_widened_avx512(const void* src, DType src_dtype, uint8_t* dst,
                                     uint16_t* widened, int64_t n, float scale, DType fp8);
void dequantize_avx512(const uint8_t* src, DType fp8, void* dst, DType dst_dtype, int64_t n,
                       float scale_inv);
// The cast with element i scaled by scales[i] (one row of scaled_cast_columns).
CastStats scaled_cast_each_scalar(const void* src, DType src_dtype, uint8_t* dst, int64_t n,
                                  const float* scales, DType fp8);
CastStats scaled_cast_each_avx2(const void* src, DType src_dtype, uint8_t* dst, int64_t n,
                                const float* scales, DType fp8);
CastStats scaled_cast_each_avx512(const void* src, DType src_dtype, uint8_t* dst, int64_t n,
                                  const float* scales, DType fp8);
// amax's and column_amax's bodies. All work on the bits: with the sign cleared, a non-NaN
// value's bits order as its magnitude does and every NaN's lie above infinity's, so the largest
// bits with NaNs made 0 give the amax and the largest bits as they are tell whether a NaN was
// there. The column bodies update best[c] and raw[c] (those two maxima, as bits) with `rows`
// more rows.
Amax amax_scalar(const void* src, DType src_dtype, int64_t n);
Amax amax_avx2(const void* src, DType src_dtype, int64_t n);
Amax amax_avx512(const void* src, DType src_dtype, int64_t n);
void column_amax_bits_scalar(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                             uint32_t* best, uint32_t* raw);
void column_amax_bits_avx2(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                           uint32_t* best, uint32_t* raw);
// The Amax of the two maxima's bits in src_dtype.
Amax amax_of_bits(uint32_t best, uint32_t raw, DType src_dtype);
// The magnitude mask and the bits of +inf of src_dtype.
uint32_t abs_mask_of(DType src_dtype);
uint32_t inf_bits_of(DType src_dtype);
// The end of a SIMD cast that stopped at element i of n: the largest of the lanes' amax, the
// counts the vector loop made, and the scalar cast of the tail [i, n) merged in.
// scales: null, or the per-element scales of scaled_cast_each (then `scale` is not used).
CastStats finish_simd_cast(const float* lane_amax, int lanes, int64_t saturated, int64_t flushed,
                           const void* src, DType src_dtype, uint8_t* dst, int64_t i, int64_t n,
                           float scale, DType fp8, const float* scales = nullptr);
// value(code) for all 256 codes of a format.
const float* decode_table(DType fp8);
}  // namespace detail

}  // namespace mantissa::kernels::fp8
