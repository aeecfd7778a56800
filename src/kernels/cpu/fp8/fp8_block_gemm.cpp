// The block-scaled FP8 product (fp8_block.h, block_scaled_gemm). Output tiles of kMb x kNb are
// spread over threads; for each 128-element slice of K a thread decodes its rows of A and
// columns of B into small float panels (the codes' values, unscaled), multiplies them in fp32
// with kRows x kCols register tiles, and promotes the slice's partial sums into the fp32
// accumulator with the two block scales. The same loop body is compiled for AVX-512, AVX2 and
// the baseline; since every product of two FP8 values is exact in fp32 and the promotion is an
// explicit fma, the levels give the same bits.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/fp8/fp8_block.h"
#include "kernels/cpu/fp8/fp8_cast.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::fp8 {
namespace {

constexpr int64_t kMb = 64;   // output rows per thread tile
constexpr int64_t kNb = 256;  // output columns per thread tile
constexpr int kRows = 4;      // register tile
constexpr int kCols = 32;

struct Panels {
  std::vector<float> a;    // [kMb][kBlockLen], rows past the tile's end zero
  std::vector<float> b;    // [kBlockLen][kNb], columns past the tile's end zero
  std::vector<float> acc;  // [kMb][kNb]
  std::vector<float> sb;   // [kNb]: B's scale of each column in this slice
  Panels() : a(kMb * kBlockLen), b(kBlockLen * kNb), acc(kMb * kNb), sb(kNb) {}
};

float scale_of(const BlockOperandView& v, int64_t i, int64_t kb) {
  return v.scale_inv[(i / v.tile_rows) * v.scale_row_stride + kb * v.scale_col_stride];
}

// One output tile (rows m0.., columns n0..) over all of K, into p.acc.
[[gnu::always_inline]] inline void tile_body(const BlockOperandView& a, const BlockOperandView& b,
                                             int64_t m0, int64_t mlen, int64_t n0, int64_t nlen,
                                             int64_t K, Panels& p) {
  const float* ta = detail::decode_table(a.fp8);
  const float* tb = detail::decode_table(b.fp8);
  float* ap = p.a.data();
  float* bp = p.b.data();
  float* acc = p.acc.data();
  std::fill(acc, acc + kMb * kNb, 0.0f);
  std::fill(ap, ap + kMb * kBlockLen, 0.0f);
  std::fill(bp, bp + kBlockLen * kNb, 0.0f);
  const int64_t m_pad = (mlen + kRows - 1) / kRows * kRows;
  const int64_t n_pad = (nlen + kCols - 1) / kCols * kCols;
  for (int64_t kb = 0; kb * kBlockLen < K; ++kb) {
    const int64_t k0 = kb * kBlockLen, kl = std::min(kBlockLen, K - k0);
    // Decode the slice: A's rows, B's columns (the loop order follows the codes' layout).
    for (int64_t i = 0; i < mlen; ++i) {
      const uint8_t* row = a.codes + (m0 + i) * a.row_stride + k0 * a.col_stride;
      for (int64_t k = 0; k < kl; ++k) ap[i * kBlockLen + k] = ta[row[k * a.col_stride]];
    }
    if (b.col_stride == 1) {
      for (int64_t j = 0; j < nlen; ++j) {
        const uint8_t* col = b.codes + (n0 + j) * b.row_stride + k0;
        for (int64_t k = 0; k < kl; ++k) bp[k * kNb + j] = tb[col[k]];
      }
    } else {
      for (int64_t k = 0; k < kl; ++k) {
        const uint8_t* line = b.codes + (k0 + k) * b.col_stride + n0 * b.row_stride;
        for (int64_t j = 0; j < nlen; ++j) bp[k * kNb + j] = tb[line[j * b.row_stride]];
      }
    }
    for (int64_t j = 0; j < nlen; ++j) p.sb[j] = scale_of(b, n0 + j, kb);
    for (int64_t j = nlen; j < n_pad; ++j) p.sb[j] = 0.0f;
    for (int64_t i0 = 0; i0 < m_pad; i0 += kRows) {
      float sa[kRows];
      for (int r = 0; r < kRows; ++r) sa[r] = i0 + r < mlen ? scale_of(a, m0 + i0 + r, kb) : 0.0f;
      for (int64_t j0 = 0; j0 < n_pad; j0 += kCols) {
        float part[kRows][kCols] = {};
        for (int64_t k = 0; k < kl; ++k) {
          const float* bk = bp + k * kNb + j0;
          for (int r = 0; r < kRows; ++r) {
            const float av = ap[(i0 + r) * kBlockLen + k];
            for (int c = 0; c < kCols; ++c) part[r][c] += av * bk[c];
          }
        }
        for (int r = 0; r < kRows; ++r) {
          float* out = acc + (i0 + r) * kNb + j0;
          for (int c = 0; c < kCols; ++c)
            out[c] = std::fma(part[r][c], sa[r] * p.sb[j0 + c], out[c]);
        }
      }
    }
  }
}

using TileFn = void (*)(const BlockOperandView&, const BlockOperandView&, int64_t, int64_t, int64_t,
                        int64_t, int64_t, Panels&);

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"))) void tile_avx512(
    const BlockOperandView& a, const BlockOperandView& b, int64_t m0, int64_t mlen, int64_t n0,
    int64_t nlen, int64_t K, Panels& p) {
  tile_body(a, b, m0, mlen, n0, nlen, K, p);
}
__attribute__((target("avx2,fma"))) void tile_avx2(const BlockOperandView& a,
                                                   const BlockOperandView& b, int64_t m0,
                                                   int64_t mlen, int64_t n0, int64_t nlen,
                                                   int64_t K, Panels& p) {
  tile_body(a, b, m0, mlen, n0, nlen, K, p);
}
void tile_scalar(const BlockOperandView& a, const BlockOperandView& b, int64_t m0, int64_t mlen,
                 int64_t n0, int64_t nlen, int64_t K, Panels& p) {
  tile_body(a, b, m0, mlen, n0, nlen, K, p);
}

TileFn tile_fn(SimdLevel level) {
  const SimdLevel l = std::min(level, simd_level());
  if (l >= SimdLevel::kAvx512) return tile_avx512;
  if (l >= SimdLevel::kAvx2) return tile_avx2;
  return tile_scalar;
}

}  // namespace

void block_scaled_gemm(const BlockOperandView& a, const BlockOperandView& b, int64_t M, int64_t N,
                       int64_t K, const float* bias, float* out, SimdLevel level) {
  MANTISSA_CHECK(M >= 0 && N >= 0 && K >= 0, "fp8 block gemm", "bad shape {} x {} x {}", M, N, K);
  MANTISSA_CHECK(a.fp8.is_float8() && b.fp8.is_float8(), "fp8 block gemm",
                 "operands must hold FP8 codes");
  if (M == 0 || N == 0) return;
  const TileFn fn = tile_fn(level);
  const int64_t mt = (M + kMb - 1) / kMb, nt = (N + kNb - 1) / kNb;
#pragma omp parallel if (mt * nt > 1 && M * N * K > (1 << 18))
  {
    Panels p;
#pragma omp for collapse(2) schedule(static)
    for (int64_t ib = 0; ib < mt; ++ib) {
      for (int64_t jb = 0; jb < nt; ++jb) {
        const int64_t m0 = ib * kMb, mlen = std::min(kMb, M - m0);
        const int64_t n0 = jb * kNb, nlen = std::min(kNb, N - n0);
        fn(a, b, m0, mlen, n0, nlen, K, p);
        for (int64_t i = 0; i < mlen; ++i) {
          const float* acc = p.acc.data() + i * kNb;
          float* o = out + (m0 + i) * N + n0;
          if (bias)
            for (int64_t j = 0; j < nlen; ++j) o[j] = acc[j] + bias[n0 + j];
          else
            std::copy(acc, acc + nlen, o);
        }
      }
    }
  }
}

}  // namespace mantissa::kernels::fp8
