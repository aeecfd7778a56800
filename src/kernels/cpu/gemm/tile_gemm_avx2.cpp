// AVX2 + FMA level of the float tile product (see tile_gemm.h), the one the fused attention runs
// on CPUs without AVX-512: register blocks of MR rows by NV vectors of 8 columns (6 x 16 for
// wide tiles: 12 accumulators, two B vectors and A's broadcast fill 15 of the 16 registers).
// A block whose last vector is partial loads and stores it through a lane mask, so any n runs
// through the same code. Compiled for the baseline target with the ISA enabled by pragma below
// (after the standard headers); tile_gemm.cpp calls it only when simd_level() >= kAvx2.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/gemm/tile_gemm.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma")

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
  __m256i last;  // lanes of the last vector that hold columns (all set when it is full)
  bool accumulate;
};

template <bool kPartial>
inline __m256 load(const float* p, __m256i mask) {
  if constexpr (kPartial) {
    return _mm256_maskload_ps(p, mask);
  } else {
    return _mm256_loadu_ps(p);
  }
}

template <bool kPartial>
inline void store(float* p, __m256i mask, __m256 v) {
  if constexpr (kPartial) {
    _mm256_maskstore_ps(p, mask, v);
  } else {
    _mm256_storeu_ps(p, v);
  }
}

// The loops over r and v are unrolled so that acc lives in registers. Each C element is one
// FMA chain over p = 0 .. k-1 in order, as the contract in tile_gemm.h asks.
template <int MR, int NV, bool kPartial>
inline void micro(const Args& g) {
  __m256 acc[MR][NV];
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      float* cp = g.c + r * g.ldc + 8 * v;
      acc[r][v] = !g.accumulate   ? _mm256_setzero_ps()
                  : (v == NV - 1) ? load<kPartial>(cp, g.last)
                                  : _mm256_loadu_ps(cp);
    }
  for (int64_t p = 0; p < g.k; ++p) {
    __m256 bv[NV];
    const float* bp = g.b + p * g.ldb;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v)
      bv[v] = v == NV - 1 ? load<kPartial>(bp + 8 * v, g.last) : _mm256_loadu_ps(bp + 8 * v);
    const float* ap = g.a + p * g.a_cs;
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(ap + r * g.a_rs);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      float* cp = g.c + r * g.ldc + 8 * v;
      if (v == NV - 1) {
        store<kPartial>(cp, g.last, acc[r][v]);
      } else {
        _mm256_storeu_ps(cp, acc[r][v]);
      }
    }
}

// Rows left over after the full MR blocks: one block of exactly `rows` rows.
template <int R, int NV, bool kPartial>
inline void tail(int64_t rows, const Args& g) {
  if constexpr (R > 0) {
    if (rows == R) {
      micro<R, NV, kPartial>(g);
    } else {
      tail<R - 1, NV, kPartial>(rows, g);
    }
  }
}

// 12 accumulators for either width: 6 rows of two vectors or 12 rows of one.
template <int NV, bool kPartial>
void rows(int64_t m, Args g) {
  constexpr int kMR = NV == 1 ? 12 : 6;
  int64_t i = 0;
  for (; i + kMR <= m; i += kMR) {
    micro<kMR, NV, kPartial>(g);
    g.a += kMR * g.a_rs;
    g.c += kMR * g.ldc;
  }
  tail<kMR - 1, NV, kPartial>(m - i, g);
}

}  // namespace

void tile_gemm_f32_avx2(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                        const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t w = std::min<int64_t>(16, n - j0);
    const int nv = w > 8 ? 2 : 1;
    const int in_last = static_cast<int>(w - 8 * (nv - 1));
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const Args g{k,         a,      a_rs,
                 a_cs,      b + j0, ldb,
                 c + j0,    ldc,    _mm256_cmpgt_epi32(_mm256_set1_epi32(in_last), lane),
                 accumulate};
    const bool partial = in_last < 8;
    if (nv == 2) {
      partial ? rows<2, true>(m, g) : rows<2, false>(m, g);
    } else {
      partial ? rows<1, true>(m, g) : rows<1, false>(m, g);
    }
  }
}

}  // namespace mantissa::kernels

#pragma GCC pop_options
