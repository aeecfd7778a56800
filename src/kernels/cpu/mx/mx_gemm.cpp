// The block-format product (mx_gemm.h). The output is cut into kMc x kNb tiles spread over
// threads; for each kKc-element slice of K a thread decodes its rows of A and columns of B into
// float panels (element value times block scale, exact in fp32; each panel once per slice) and
// runs an R x C register tile over them that continues the fp32 accumulator: one fma per k, in
// k order. The register tiles are written with AVX-512 and AVX2 intrinsics and as plain code
// with std::fma for the baseline, the same operation, so the levels give the same bits; only
// the register tile's shape differs.
#include "kernels/cpu/mx/mx_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "mantissa/core/error.h"

namespace mantissa::kernels::mx {
namespace {

constexpr int64_t kMc = 128;  // output rows per thread tile
constexpr int64_t kNb = 256;  // output columns per thread tile
constexpr int64_t kKc = 128;  // K per packed slice: a multiple of both block lengths
constexpr int64_t kMaxR = 8;  // the tallest register tile (panel rows are padded to it)
// The value of every code byte as an element and as a block scale.
struct Tables {
  std::array<float, 256> e4m3, e5m2, e2m1, e8m0, e4m3_scale;
  Tables() {
    for (int c = 0; c < 256; ++c) {
      const auto u = static_cast<uint8_t>(c);
      e4m3[c] = scalar::e4m3_value(u);
      e5m2[c] = scalar::e5m2_value(u);
      e2m1[c] = scalar::kE2m1Values[c & 15];
      e8m0[c] = scalar::e8m0_value(u);
      e4m3_scale[c] = scalar::e4m3_value(u);
    }
  }
  const float* element(Element e) const {
    return e == Element::kE4m3 ? e4m3.data() : (e == Element::kE5m2 ? e5m2.data() : e2m1.data());
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

struct Panels {
  std::vector<float> a;    // [kMc + kMaxR][kKc], rows past the tile's end zero
  std::vector<float> b;    // [kKc][kNb], columns past the tile's end zero
  std::vector<float> acc;  // [kMc + kMaxR][kNb]
  Panels() : a((kMc + kMaxR) * kKc), b(kKc * kNb), acc((kMc + kMaxR) * kNb) {}
};

// Decodes V(i, k0 + k) for k < kl into dst[k * step].
[[gnu::always_inline]] inline void decode_line(const MxOperandView& v, int64_t i, int64_t k0,
                                               int64_t kl, float* dst, int64_t step) {
  const Tables& t = tables();
  const float* ev = t.element(v.element);
  const float* sv = v.nvfp4 ? t.e4m3_scale.data() : t.e8m0.data();
  const int64_t block = v.nvfp4 ? kNvfp4Block : kMxBlock;
  const int64_t code_row = code_bytes(v.element, v.cols);
  const int64_t scale_row = (v.cols + block - 1) / block;
  const bool fp4 = v.element == Element::kE2m1;
  if (!v.transposed) {  // stored row i, columns k0.. (a block boundary): blocks along K
    const uint8_t* codes = v.codes + i * code_row;
    const uint8_t* scales = v.scales + i * scale_row + k0 / block;
    for (int64_t b0 = 0; b0 < kl; b0 += block) {
      const float s = sv[scales[b0 / block]];
      const int64_t len = std::min(block, kl - b0);
      float* d = dst + b0 * step;
      if (fp4) {
        const uint8_t* c = codes + (k0 + b0) / 2;  // k0 + b0 is even
        for (int64_t k = 0; k < len; ++k) d[k * step] = ev[(c[k >> 1] >> ((k & 1) * 4)) & 15] * s;
      } else {
        const uint8_t* c = codes + k0 + b0;
        for (int64_t k = 0; k < len; ++k) d[k * step] = ev[c[k]] * s;
      }
    }
  } else {  // stored column i, rows k0..
    const int64_t byte = fp4 ? i >> 1 : i;
    const int shift = fp4 ? static_cast<int>(i & 1) * 4 : 0;
    for (int64_t k = 0; k < kl; ++k) {
      const int64_t r = k0 + k;
      const auto code = static_cast<uint8_t>(v.codes[r * code_row + byte] >> shift);
      dst[k * step] = ev[code] * sv[v.scales[r * scale_row + i / block]];
    }
  }
}

// Decodes V(i0 + j, k0 + k) for j < n (at most 16), k < kl into dst[k * kNb + j]: B's panel,
// written a line of 16 columns at a time. Blocks along K only (V = X).
void decode_columns(const MxOperandView& v, int64_t i0, int64_t n, int64_t k0, int64_t kl,
                    float* dst) {
  const Tables& t = tables();
  const float* ev = t.element(v.element);
  const float* sv = v.nvfp4 ? t.e4m3_scale.data() : t.e8m0.data();
  const int64_t block = v.nvfp4 ? kNvfp4Block : kMxBlock;
  const int64_t code_row = code_bytes(v.element, v.cols);
  const int64_t scale_row = (v.cols + block - 1) / block;
  const bool fp4 = v.element == Element::kE2m1;
  float s[16];
  const uint8_t* rows[16];
  for (int64_t b0 = 0; b0 < kl; b0 += block) {
    const int64_t len = std::min(block, kl - b0);
    for (int64_t j = 0; j < n; ++j) {
      s[j] = sv[v.scales[(i0 + j) * scale_row + (k0 + b0) / block]];
      rows[j] = v.codes + (i0 + j) * code_row + (fp4 ? (k0 + b0) / 2 : k0 + b0);
    }
    if (fp4) {
      for (int64_t k = 0; k < len; ++k) {
        float* d = dst + (b0 + k) * kNb;
        const int shift = static_cast<int>(k & 1) * 4;
        for (int64_t j = 0; j < n; ++j) d[j] = ev[(rows[j][k >> 1] >> shift) & 15] * s[j];
      }
    } else {
      for (int64_t k = 0; k < len; ++k) {
        float* d = dst + (b0 + k) * kNb;
        for (int64_t j = 0; j < n; ++j) d[j] = ev[rows[j][k]] * s[j];
      }
    }
  }
}

// acc[r][c] = fma(ap[r][k], bp[k][c], acc[r][c]) for k < kl, in k order, in registers.
using MicroFn = void (*)(const float* ap, const float* bp, int64_t kl, float* acc);

template <int R>
__attribute__((target("avx512f,fma"))) void micro_avx512(const float* ap, const float* bp,
                                                         int64_t kl, float* acc) {
  __m512 c[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    c[r][0] = _mm512_loadu_ps(acc + r * kNb);
    c[r][1] = _mm512_loadu_ps(acc + r * kNb + 16);
  }
  for (int64_t k = 0; k < kl; ++k) {
    const __m512 b0 = _mm512_loadu_ps(bp + k * kNb), b1 = _mm512_loadu_ps(bp + k * kNb + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(ap[r * kKc + k]);
      c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);
      c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(acc + r * kNb, c[r][0]);
    _mm512_storeu_ps(acc + r * kNb + 16, c[r][1]);
  }
}

template <int R>
__attribute__((target("avx2,fma"))) void micro_avx2(const float* ap, const float* bp, int64_t kl,
                                                    float* acc) {
  __m256 c[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    c[r][0] = _mm256_loadu_ps(acc + r * kNb);
    c[r][1] = _mm256_loadu_ps(acc + r * kNb + 8);
  }
  for (int64_t k = 0; k < kl; ++k) {
    const __m256 b0 = _mm256_loadu_ps(bp + k * kNb), b1 = _mm256_loadu_ps(bp + k * kNb + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(ap + r * kKc + k);
      c[r][0] = _mm256_fmadd_ps(a, b0, c[r][0]);
      c[r][1] = _mm256_fmadd_ps(a, b1, c[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(acc + r * kNb, c[r][0]);
    _mm256_storeu_ps(acc + r * kNb + 8, c[r][1]);
  }
}

void micro_scalar(const float* ap, const float* bp, int64_t kl, float* acc) {
  constexpr int R = 4, C = 8;
  float c[R][C];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j) c[r][j] = acc[r * kNb + j];
  for (int64_t k = 0; k < kl; ++k)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < C; ++j) c[r][j] = std::fma(ap[r * kKc + k], bp[k * kNb + j], c[r][j]);
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j) acc[r * kNb + j] = c[r][j];
}

struct Level {
  int rows, cols;  // the register tile
  MicroFn micro;
};

Level level_of(SimdLevel level) {
  const SimdLevel l = std::min(level, simd_level());
  if (l >= SimdLevel::kAvx512) return {8, 32, micro_avx512<8>};
  if (l >= SimdLevel::kAvx2) return {6, 16, micro_avx2<6>};
  return {4, 8, micro_scalar};
}

// One output tile (rows m0.., columns n0..) over all of K, into p.acc.
void tile(const Level& lv, const MxOperandView& a, const MxOperandView& b, int64_t m0, int64_t mlen,
          int64_t n0, int64_t nlen, int64_t K, Panels& p) {
  float* ap = p.a.data();
  float* bp = p.b.data();
  float* acc = p.acc.data();
  std::fill(p.acc.begin(), p.acc.end(), 0.0f);
  std::fill(p.a.begin(), p.a.end(), 0.0f);
  std::fill(p.b.begin(), p.b.end(), 0.0f);
  const int64_t m_pad = (mlen + lv.rows - 1) / lv.rows * lv.rows;
  const int64_t n_pad = (nlen + lv.cols - 1) / lv.cols * lv.cols;
  for (int64_t k0 = 0; k0 < K; k0 += kKc) {
    const int64_t kl = std::min(kKc, K - k0);
    for (int64_t i = 0; i < mlen; ++i) decode_line(a, m0 + i, k0, kl, ap + i * kKc, 1);
    if (b.transposed) {
      for (int64_t j = 0; j < nlen; ++j) decode_line(b, n0 + j, k0, kl, bp + j, kNb);
    } else {
      for (int64_t j = 0; j < nlen; j += 16)
        decode_columns(b, n0 + j, std::min<int64_t>(16, nlen - j), k0, kl, bp + j);
    }
    for (int64_t j0 = 0; j0 < n_pad; j0 += lv.cols)
      for (int64_t i0 = 0; i0 < m_pad; i0 += lv.rows)
        lv.micro(ap + i0 * kKc, bp + j0, kl, acc + i0 * kNb + j0);
  }
}

}  // namespace

void mx_gemm(const MxOperandView& a, const MxOperandView& b, int64_t M, int64_t N, int64_t K,
             float alpha, const float* bias, float* out, SimdLevel level) {
  MANTISSA_CHECK(M >= 0 && N >= 0 && K >= 0, "block-format gemm", "bad shape {} x {} x {}", M, N,
                 K);
  if (M == 0 || N == 0) return;
  const Level lv = level_of(level);
  const int64_t mt = (M + kMc - 1) / kMc, nt = (N + kNb - 1) / kNb;
#pragma omp parallel if (mt * nt > 1 && M * N * K > (1 << 18))
  {
    Panels p;
#pragma omp for collapse(2) schedule(static)
    for (int64_t ib = 0; ib < mt; ++ib) {
      for (int64_t jb = 0; jb < nt; ++jb) {
        const int64_t m0 = ib * kMc, mlen = std::min(kMc, M - m0);
        const int64_t n0 = jb * kNb, nlen = std::min(kNb, N - n0);
        tile(lv, a, b, m0, mlen, n0, nlen, K, p);
        for (int64_t i = 0; i < mlen; ++i) {
          const float* acc = p.acc.data() + i * kNb;
          float* o = out + (m0 + i) * N + n0;
          if (bias)
            for (int64_t j = 0; j < nlen; ++j) o[j] = acc[j] * alpha + bias[n0 + j];
          else
            for (int64_t j = 0; j < nlen; ++j) o[j] = acc[j] * alpha;
        }
      }
    }
  }
}

}  // namespace mantissa::kernels::mx
