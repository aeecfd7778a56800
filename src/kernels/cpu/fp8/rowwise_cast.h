#pragma once
// The rowwise recipes' E4M3 casts of a bfloat16 operand under power-of-2 scales (fp8/rowwise.h),
// and of a float32 one's rows,
// on AVX2 with sixteen elements a vector in 16-bit lanes: x * 2^e is x's bits with e added to
// the exponent field, and E4M3's rounding of a normal result drops four of bfloat16's seven
// mantissa bits (round to nearest even by integer adds). A vector holding an element whose code
// is subnormal, or a subnormal x, is cast in float32 lanes as scaled_cast casts. The codes and
// the saturated and flushed counts are scaled_cast's (or scaled_cast_columns's) bit for bit.
// Each function returns false, having written nothing, where its preconditions fail (a NaN, an
// infinite amax, a scale that is not a normal power of two, amax * scale above 448); the caller
// then takes the general kernels (fp8_cast.h).
#include <cstdint>
#include <functional>

#include "kernels/cpu/fp8/fp8_cast.h"
#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels::fp8 {

// Whether these kernels run at `level` (AVX2 and above, on a CPU that has it).
bool rowwise_bf16_usable(SimdLevel level = simd_level());

// max |x| over n bfloat16 values (amax()'s value); false where a NaN is among them.
bool bf16_amax_without_nan(const uint16_t* src, int64_t n, float* amax);

// dst[i] = satfinite_rne_e4m3(f32(src[i] * scale)) with scaled_cast's saturated and flushed
// counts (CastStats::amax set to `amax`); amax: max |src[i]|.
bool cast_bf16_pow2(const uint16_t* src, uint8_t* dst, int64_t n, float scale, float amax,
                    CastStats* stats);

// max |x| over n float32 values (amax()'s value); false where a NaN is among them.
bool f32_amax_without_nan(const float* src, int64_t n, float* amax);

// cast_bf16_pow2 of float32 values: their bits rounded to odd at bfloat16's width take the same
// 16-bit-lane codes. Also false for scales above 2^120. next: null, or the n values read next
// (the next row), fetched into L1 while these are cast; stream: the codes bypass the caches
// (where dst is 32-byte aligned).
bool cast_f32_pow2(const float* src, uint8_t* dst, int64_t n, float scale, float amax,
                   CastStats* stats, const float* next = nullptr, bool stream = false);

// The scales of `cols` columns from their amaxes: scales[c] for amax[c]. It may be called on
// several threads at once (each with its own arrays) and must give each the same scales.
using ColumnScales = std::function<void(const float* amax, float* scales, int64_t cols)>;

// The columns' casts of a row-major [rows, cols] bfloat16 matrix with their amax pass, in one
// parallel region: each thread takes the column maxima of its band of rows, and after one
// barrier merges the bands' maxima, sets the scales and casts its rows. False where a NaN is among
// the values (amax, scales and dst then undefined). Else amax[c] is column_amax()'s, scales as
// scales_of sets them, and *cast says whether dst and stats hold scaled_cast_columns()'s codes to
// E4M3 and counts (CastStats::amax: the largest amax[c]); it is false, dst and stats untouched,
// where a scale is not a normal power of two or an amax times its scale is above 448.
bool quantize_columns_bf16_pow2(const uint16_t* src, uint8_t* dst, int64_t rows, int64_t cols,
                                const ColumnScales& scales_of, float* amax, float* scales,
                                CastStats* stats, bool* cast);

// scaled_cast_columns() to E4M3 of a row-major [rows, cols] float32 matrix, column c scaled by
// scales[c], its max |x| amax[c] (cast_f32_pow2's codes, 64 columns a step); the counts over the
// whole matrix (CastStats::amax: the largest amax[c]). False, nothing written, where a scale is
// not a normal power of two or above 2^120, or an amax times its scale is above 448.
bool cast_columns_f32_pow2(const float* src, uint8_t* dst, int64_t rows, int64_t cols,
                           const float* scales, const float* amax, CastStats* stats);

}  // namespace mantissa::kernels::fp8
