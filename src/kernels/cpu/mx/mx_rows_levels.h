#pragma once
// Internal: the MX row casts by element type of the AVX2 level (mx_rows_fp8_avx2.cpp,
// mx_rows_e2m1_avx2.cpp) and the AVX-512 level (mx_rows_fp8_avx512.cpp, mx_rows_e2m1_avx512.cpp),
// which the levels' MxKernels (mx_cast_avx2.cpp, mx_cast_avx512.cpp) call: a segment of n elements
// of one row from a block boundary (MxKernels::encode), its codes streamed past the caches where
// `stream` and the body finds that faster, with its statistics where `stats` (else an empty run).
#include <cstdint>

#include "kernels/cpu/mx/mx_cast.h"

namespace mantissa::kernels::mx::detail {

namespace avx2 {

// FP8 elements: e is E4M3 or E5M2.
MxStatsRun mx_rows_fp8(const void* src, DType src_dtype, int64_t n, Element e, E8m0Rounding r,
                       uint8_t* codes, uint8_t* scales, bool stats, bool stream);
MxStatsRun mx_rows_e2m1(const void* src, DType src_dtype, int64_t n, E8m0Rounding r, uint8_t* codes,
                        uint8_t* scales, bool stats, bool stream);

}  // namespace avx2

namespace avx512 {
MxStatsRun mx_rows_fp8(const void* src, DType src_dtype, int64_t n, Element e, E8m0Rounding r,
                       uint8_t* codes, uint8_t* scales, bool stats, bool stream);
// E2M1 elements: under the floor scale, with VBMI, this level's body (mx_rows_e2m1_avx512.cpp);
// else the AVX2 body's.
MxStatsRun mx_rows_e2m1(const void* src, DType src_dtype, int64_t n, E8m0Rounding r, uint8_t* codes,
                        uint8_t* scales, bool stats, bool stream);
}  // namespace avx512

}  // namespace mantissa::kernels::mx::detail
