// The bf16 micro-kernel of the native GEMM: VDPBF16PS multiplies a broadcast (a[i][k],
// a[i][k+1]) pair by 16 VNNI pairs of B and adds both products into each fp32 lane, so one
// instruction does two k steps of a 16-column strip. Like VDPBF16PS everywhere (oneDNN
// included), it treats bf16 subnormal inputs as zero.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cstring>

#include "kernels/cpu/gemm/gemm_epilogue_avx512.h"

namespace mantissa::kernels::gemm {

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void kernel_bf16_avx512(
    int64_t kc, const uint16_t* a, const uint16_t* b, const Tile& t) {
  Acc acc;
  load_acc(acc, t);
  for (int64_t k = 0; k < kc; k += 2) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 32);
#pragma GCC unroll 14
    for (int i = 0; i < kMR; ++i) {
      int32_t pair;
      std::memcpy(&pair, a + 2 * i, sizeof pair);
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(pair);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
    a += 2 * kMR;
    b += 2 * kNR;
  }
  store_acc(acc, t);
}

}  // namespace mantissa::kernels::gemm
