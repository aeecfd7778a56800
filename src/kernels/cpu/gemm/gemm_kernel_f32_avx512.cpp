// The f32 micro-kernel of the native GEMM: a 14x32 C tile in 28 zmm accumulators, one
// broadcast of A times two zmm of B per row and k step. Compiled for the baseline target with
// a per-function target; gemm_native.cpp calls it only when the CPU has AVX-512F.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "kernels/cpu/gemm/gemm_epilogue_avx512.h"

namespace mantissa::kernels::gemm {

__attribute__((target("avx512f,avx512bw,avx512vl"))) void kernel_f32_avx512(int64_t kc,
                                                                            const float* a,
                                                                            const float* b,
                                                                            const Tile& t) {
  Acc acc;
  load_acc(acc, t);
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_loadu_ps(b);
    const __m512 b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 14
    for (int i = 0; i < kMR; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += kMR;
    b += kNR;
  }
  store_acc(acc, t);
}

}  // namespace mantissa::kernels::gemm
