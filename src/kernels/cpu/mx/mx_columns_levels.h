#pragma once
// Internal: the MX column casts by element type of the AVX2 level (mx_columns_fp8_avx2.cpp,
// mx_columns_e2m1_avx2.cpp) and the AVX-512 level (mx_columns_e2m1_avx512.cpp), which the
// levels' MxKernels (mx_cast_avx2.cpp, mx_cast_avx512.cpp) call as
// MxKernels::encode_column_band: one band of src (cols elements a row), `rows` rows (a multiple
// of 32 but at the tensor's end), their codes and scale rows, with `runs` column c's blocks'
// statistics appended to runs[c].
#include <cstdint>

#include "kernels/cpu/mx/mx_cast.h"

namespace mantissa::kernels::mx::detail {

namespace avx2 {

// FP8 elements: e is E4M3 or E5M2.
void mx_columns_fp8(const void* src, DType src_dtype, int64_t rows, int64_t cols, Element e,
                    E8m0Rounding r, uint8_t* codes, uint8_t* scales, MxStatsRun* runs);
void mx_columns_e2m1(const void* src, DType src_dtype, int64_t rows, int64_t cols, E8m0Rounding r,
                     uint8_t* codes, uint8_t* scales, MxStatsRun* runs);

// MxKernels::encode_column_band of a level whose E2M1 body is `E2m1`; FP8 by the AVX2 body.
template <auto E2m1>
void encode_column_band_with(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                             Element e, E8m0Rounding r, uint8_t* codes, uint8_t* scales,
                             MxStatsRun* runs) {
  if (e == Element::kE2m1)
    E2m1(src, src_dtype, rows, cols, r, codes, scales, runs);
  else
    mx_columns_fp8(src, src_dtype, rows, cols, e, r, codes, scales, runs);
}

// MxKernels::encode_column_band of the AVX2 level.
inline constexpr auto encode_column_band = encode_column_band_with<&mx_columns_e2m1>;

}  // namespace avx2

namespace avx512 {

// E2M1 elements: under the floor scale without statistics by mx_columns_e2m1_avx512.cpp's VBMI
// body where the CPU has VBMI, the others by the AVX2 bodies.
void mx_columns_e2m1(const void* src, DType src_dtype, int64_t rows, int64_t cols, E8m0Rounding r,
                     uint8_t* codes, uint8_t* scales, MxStatsRun* runs);

// MxKernels::encode_column_band of the AVX-512 level: FP8 by the AVX2 body.
inline constexpr auto encode_column_band = avx2::encode_column_band_with<&mx_columns_e2m1>;

}  // namespace avx512

}  // namespace mantissa::kernels::mx::detail
