#pragma once
// AVX-512 helpers of the GEMM packing; callers check the CPU (the native GEMM requires
// AVX-512F/BW/VL before it packs anything).
#include <cstdint>

namespace mantissa::kernels::gemm {

// dst[c * dst_ld + r] = src[r * ld + c] for r < rows, c < cols (both <= 16); other dst
// elements are left as they are.
void transpose32_avx512(const uint32_t* src, int64_t ld, int rows, int cols, uint32_t* dst,
                        int64_t dst_ld);

// dst[2j] = r0[j], dst[2j + 1] = r1[j] (0 when r1 is null) for j < count (<= 32).
void interleave_bf16_avx512(const uint16_t* r0, const uint16_t* r1, int count, uint16_t* dst);

}  // namespace mantissa::kernels::gemm
