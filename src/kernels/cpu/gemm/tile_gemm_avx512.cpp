// AVX-512F level of the float tile product (see tile_gemm.h): register blocks of MR rows by NV
// vectors of 16 columns, the last vector masked, so any n runs through the same code. Compiled
// for the baseline target with the ISA enabled by pragma below (after the standard headers);
// tile_gemm.cpp calls it only when cpu_features() says so.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/gemm/tile_gemm.h"

#pragma GCC push_options
#pragma GCC target("avx512f")

namespace mantissa::kernels {
namespace {

struct Args {
  int64_t k;
  const float* a;
  int64_t a_rs, a_cs;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
  __mmask16 last;  // columns of the last vector
  bool accumulate;
};

// The loops over r and v are unrolled so that acc lives in registers (GCC keeps a
// non-unrolled array on the stack).
template <int MR, int NV>
inline void micro(const Args& g) {
  __m512 acc[MR][NV];
#pragma GCC unroll 24
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      acc[r][v] = g.accumulate ? _mm512_maskz_loadu_ps(v == NV - 1 ? g.last : 0xffff,
                                                       g.c + r * g.ldc + 16 * v)
                               : _mm512_setzero_ps();
  for (int64_t p = 0; p < g.k; ++p) {
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      bv[v] = _mm512_maskz_loadu_ps(v == NV - 1 ? g.last : 0xffff, g.b + p * g.ldb + 16 * v);
    const float* ap = g.a + p * g.a_cs;
#pragma GCC unroll 24
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(ap[r * g.a_rs]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 24
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      _mm512_mask_storeu_ps(g.c + r * g.ldc + 16 * v, v == NV - 1 ? g.last : 0xffff, acc[r][v]);
}

// Rows left over after the full MR blocks: one block of exactly `rows` rows.
template <int R, int NV>
inline void tail(int64_t rows, const Args& g) {
  if constexpr (R > 0) {
    if (rows == R) {
      micro<R, NV>(g);
    } else {
      tail<R - 1, NV>(rows, g);
    }
  }
}

// 24 accumulators (of 32 registers) for any NV: the rest holds B's vectors and A's broadcast.
template <int NV>
void rows(int64_t m, Args g) {
  constexpr int kMR = NV == 1 ? 12 : 24 / NV;
  int64_t i = 0;
  for (; i + kMR <= m; i += kMR) {
    micro<kMR, NV>(g);
    g.a += kMR * g.a_rs;
    g.c += kMR * g.ldc;
  }
  tail<kMR - 1, NV>(m - i, g);
}

}  // namespace

void tile_gemm_f32_avx512(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs,
                          int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc,
                          bool accumulate) {
  for (int64_t j0 = 0; j0 < n; j0 += 64) {
    const int64_t w = std::min<int64_t>(64, n - j0);
    const int nv = static_cast<int>((w + 15) / 16);
    const int64_t in_last = w - 16 * (nv - 1);
    const Args g{k,         a,      a_rs,
                 a_cs,      b + j0, ldb,
                 c + j0,    ldc,    static_cast<__mmask16>((1u << in_last) - 1),
                 accumulate};
    switch (nv) {
      case 1:
        rows<1>(m, g);
        break;
      case 2:
        rows<2>(m, g);
        break;
      case 3:
        rows<3>(m, g);
        break;
      default:
        rows<4>(m, g);
        break;
    }
  }
}

}  // namespace mantissa::kernels

#pragma GCC pop_options
