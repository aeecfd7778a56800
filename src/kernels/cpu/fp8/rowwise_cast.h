#pragma once
// The rowwise recipes' E4M3 casts of a bfloat16 operand under power-of-2 scales (fp8/rowwise.h),
// and of a float32 one's rows (also the current recipe's float32 cast, whose products are cast
// as float32 values under the scale 1: cast_f32_scaled), on AVX2 with sixteen elements a vector
// in 16-bit lanes: x * 2^e is x's bits with e added to
// the exponent field, and E4M3's rounding of a normal result drops four of bfloat16's seven
// mantissa bits (round to nearest even by integer adds). A vector holding an element whose code
// is subnormal, or a subnormal x, is cast in float32 lanes as scaled_cast casts. The codes and
// the saturated and flushed counts are scaled_cast's (or scaled_cast_columns's) bit for bit.
// Each function returns false, having written nothing, where its preconditions fail (a NaN, an
// infinite amax, a scale that is not a normal power of two, amax * scale above 448); the caller
// then takes the general kernels (fp8_cast.h).
#include <cstdint>

#include "kernels/cpu/fp8/fp8_cast.h"
#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels::fp8 {

// Whether these kernels run at `level` (AVX2 and above, on a CPU that has it).
bool rowwise_bf16_usable(SimdLevel level = simd_level());

// max |x| over n bfloat16 values (amax()'s value); false where a NaN is among them.
bool bf16_amax_without_nan(const uint16_t* src, int64_t n, float* amax);

// dst[i] = satfinite_rne_e4m3(f32(src[i] * scale)) with scaled_cast's saturated and flushed
// counts (CastStats::amax set to `amax`); amax: max |src[i]|. next: null, or the n values read
// next (the next row), fetched into L1 while these are cast; stream: the codes bypass the caches
// (where dst is 32-byte aligned).
bool cast_bf16_pow2(const uint16_t* src, uint8_t* dst, int64_t n, float scale, float amax,
                    CastStats* stats, const uint16_t* next = nullptr, bool stream = false);

// scaled_cast() of n float32 values to E4M3 under any scale >= 1 where amax (max |src[i]|, no
// NaN) times scale is at most 448: the products' codes in 16-bit lanes, as cast_f32_pow2 takes
// them under the scale 1 (CastStats::amax set to `amax`). stream: as cast_f32_pow2's.
bool cast_f32_scaled(const float* src, uint8_t* dst, int64_t n, float scale, float amax,
                     CastStats* stats, bool stream = false);

// max |x| over n float32 values (amax()'s value); false where a NaN is among them.
bool f32_amax_without_nan(const float* src, int64_t n, float* amax);

// cast_bf16_pow2 of float32 values: their bits rounded to odd at bfloat16's width take the same
// 16-bit-lane codes. Also false for scales above 2^120. next: null, or the n values read next
// (the next row), fetched into L1 while these are cast; stream: the codes bypass the caches
// (where dst is 32-byte aligned).
bool cast_f32_pow2(const float* src, uint8_t* dst, int64_t n, float scale, float amax,
                   CastStats* stats, const float* next = nullptr, bool stream = false);

// column_amax() of a row-major [rows, cols] bfloat16 matrix into amax[cols]; false where a NaN
// is among the values.
bool bf16_column_amax_without_nan(const uint16_t* src, int64_t rows, int64_t cols, float* amax);

// scaled_cast_columns() to E4M3 of a row-major [rows, cols] bfloat16 matrix, column c scaled by
// scales[c], its max |x| amax[c]; the counts over the whole matrix (CastStats::amax: the largest
// amax[c]). Rows are split over threads as scaled_cast_columns splits them.
bool cast_columns_bf16_pow2(const uint16_t* src, uint8_t* dst, int64_t rows, int64_t cols,
                            const float* scales, const float* amax, CastStats* stats);

// cast_columns_bf16_pow2 of a float32 matrix (cast_f32_pow2's codes, 64 columns a step); also
// false where a column's scale is above 2^120.
bool cast_columns_f32_pow2(const float* src, uint8_t* dst, int64_t rows, int64_t cols,
                           const float* scales, const float* amax, CastStats* stats);

}  // namespace mantissa::kernels::fp8
