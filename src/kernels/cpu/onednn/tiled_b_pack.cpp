// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/cpu/onednn/tiled_b_pack.h"

#include <immintrin.h>

#include <algorithm>

#include "mantissa/core/cpu_features.h"

#define MANTISSA_AVX512BW __attribute__((target("avx512f,avx512bw")))

namespace mantissa::kernels {
namespace {

// Where (k, n) of a tile lives inside it: pairs of consecutive k side by side, 64 n per k pair.
constexpr int64_t in_tile(int64_t k, int64_t n) { return (k / 2) * 128 + n * 2 + k % 2; }

// Columns [0, count) of a 32-column piece, as a mask (count clamped to 0..32).
MANTISSA_AVX512BW inline __mmask32 first(int64_t count) {
  if (count >= 32) return ~__mmask32{0};
  return count <= 0 ? __mmask32{0} : static_cast<__mmask32>((uint32_t{1} << count) - 1);
}

MANTISSA_AVX512BW void pack_avx512(const uint16_t* src, int64_t ld, int64_t rows, int64_t n,
                                   const Bf16TiledB& t, int64_t kt, uint16_t* b) {
  // Word 2i of a pair vector takes row a's column i, word 2i + 1 row b's (index 32 + i).
  alignas(64) uint16_t lo_idx[32], hi_idx[32];
  for (int i = 0; i < 16; ++i) {
    lo_idx[2 * i] = static_cast<uint16_t>(i);
    lo_idx[2 * i + 1] = static_cast<uint16_t>(32 + i);
    hi_idx[2 * i] = static_cast<uint16_t>(16 + i);
    hi_idx[2 * i + 1] = static_cast<uint16_t>(48 + i);
  }
  const __m512i lo = _mm512_load_si512(lo_idx), hi = _mm512_load_si512(hi_idx);
  for (int64_t nt = 0; nt < t.n_tiles; ++nt) {
    uint16_t* tile = b + kt * t.k_tile_stride + nt * t.n_tile_stride;
    const int64_t c0 = nt * Bf16TiledB::kTileN, cols = std::min<int64_t>(64, n - c0);
    const __mmask32 m0 = first(cols), m1 = first(cols - 32);
    for (int64_t j = 0; j < Bf16TiledB::kTileK / 2; ++j) {
      __m512i a0 = _mm512_setzero_si512(), a1 = a0, b0 = a0, b1 = a0;
      if (2 * j < rows) {
        const uint16_t* ra = src + 2 * j * ld + c0;
        a0 = _mm512_maskz_loadu_epi16(m0, ra);
        a1 = _mm512_maskz_loadu_epi16(m1, ra + 32);
      }
      if (2 * j + 1 < rows) {
        const uint16_t* rb = src + (2 * j + 1) * ld + c0;
        b0 = _mm512_maskz_loadu_epi16(m0, rb);
        b1 = _mm512_maskz_loadu_epi16(m1, rb + 32);
      }
      uint16_t* out = tile + j * 128;
      _mm512_storeu_si512(out, _mm512_permutex2var_epi16(a0, lo, b0));
      _mm512_storeu_si512(out + 32, _mm512_permutex2var_epi16(a0, hi, b0));
      _mm512_storeu_si512(out + 64, _mm512_permutex2var_epi16(a1, lo, b1));
      _mm512_storeu_si512(out + 96, _mm512_permutex2var_epi16(a1, hi, b1));
    }
  }
}

// The 16 x 16 transpose of 32-bit lanes: out[i] holds lane i of every in[r], r = 0..15.
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void transpose16(
    const __m512i in[16], __m512i out[16]) {
  __m512i t[16], u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
  }
  // u[4i + e], 128-bit lane L: element 4L + e of rows 4i .. 4i + 3.
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
#pragma GCC unroll 4
  for (int e = 0; e < 4; ++e) {
    const __m512i v02 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x88);  // lanes 0, 2 of u[e], u[4+e]
    const __m512i w02 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x88);
    const __m512i v13 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xDD);  // lanes 1, 3
    const __m512i w13 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xDD);
    out[e] = _mm512_shuffle_i32x4(v02, w02, 0x88);
    out[8 + e] = _mm512_shuffle_i32x4(v02, w02, 0xDD);
    out[4 + e] = _mm512_shuffle_i32x4(v13, w13, 0x88);
    out[12 + e] = _mm512_shuffle_i32x4(v13, w13, 0xDD);
  }
}

// A tile's 64 columns come from 64 rows of R; each row's 32 values of the tile's k range are 16
// k pairs (dwords), and tile row j (k pair j) takes dword j of every row: four 16 x 16
// transposes of dwords.
MANTISSA_AVX512BW void pack_transposed_avx512(const uint16_t* src, int64_t ld, int64_t rows,
                                              int64_t k, const Bf16TiledB& t, int64_t nt,
                                              uint16_t* b) {
  for (int64_t kt = 0; kt < t.k_tiles; ++kt) {
    uint16_t* tile = b + kt * t.k_tile_stride + nt * t.n_tile_stride;
    const int64_t c0 = kt * Bf16TiledB::kTileK;
    const __mmask32 cols = first(k - c0);
    for (int64_t q = 0; q < 4; ++q) {  // columns 16q .. 16q + 15 of the tile
      __m512i in[16], out[16];
#pragma GCC unroll 16
      for (int64_t i = 0; i < 16; ++i) {
        const int64_t r = 16 * q + i;
        in[i] =
            r < rows ? _mm512_maskz_loadu_epi16(cols, src + r * ld + c0) : _mm512_setzero_si512();
      }
      transpose16(in, out);
#pragma GCC unroll 16
      for (int64_t j = 0; j < 16; ++j) _mm512_storeu_si512(tile + j * 128 + 32 * q, out[j]);
    }
  }
}

}  // namespace

void pack_bf16_n_tile_transposed_scalar(const uint16_t* src, int64_t ld, int64_t rows, int64_t k,
                                        const Bf16TiledB& t, int64_t nt, uint16_t* b) {
  for (int64_t kt = 0; kt < t.k_tiles; ++kt) {
    uint16_t* tile = b + kt * t.k_tile_stride + nt * t.n_tile_stride;
    for (int64_t kk = 0; kk < Bf16TiledB::kTileK; ++kk)
      for (int64_t c = 0; c < Bf16TiledB::kTileN; ++c) {
        const int64_t col = kt * Bf16TiledB::kTileK + kk;  // B's row: R's column
        tile[in_tile(kk, c)] = c < rows && col < k ? src[c * ld + col] : uint16_t{0};
      }
  }
}

void pack_bf16_n_tile_transposed(const uint16_t* src, int64_t ld, int64_t rows, int64_t k,
                                 const Bf16TiledB& t, int64_t nt, uint16_t* b) {
  if (simd_level() >= SimdLevel::kAvx512)
    pack_transposed_avx512(src, ld, rows, k, t, nt, b);
  else
    pack_bf16_n_tile_transposed_scalar(src, ld, rows, k, t, nt, b);
}

void pack_bf16_k_tile_scalar(const uint16_t* src, int64_t ld, int64_t rows, int64_t n,
                             const Bf16TiledB& t, int64_t kt, uint16_t* b) {
  for (int64_t nt = 0; nt < t.n_tiles; ++nt) {
    uint16_t* tile = b + kt * t.k_tile_stride + nt * t.n_tile_stride;
    for (int64_t k = 0; k < Bf16TiledB::kTileK; ++k)
      for (int64_t c = 0; c < Bf16TiledB::kTileN; ++c) {
        const int64_t col = nt * Bf16TiledB::kTileN + c;
        tile[in_tile(k, c)] = k < rows && col < n ? src[k * ld + col] : uint16_t{0};
      }
  }
}

void pack_bf16_k_tile(const uint16_t* src, int64_t ld, int64_t rows, int64_t n, const Bf16TiledB& t,
                      int64_t kt, uint16_t* b) {
  if (simd_level() >= SimdLevel::kAvx512)
    pack_avx512(src, ld, rows, n, t, kt, b);
  else
    pack_bf16_k_tile_scalar(src, ld, rows, n, t, kt, b);
}

}  // namespace mantissa::kernels
