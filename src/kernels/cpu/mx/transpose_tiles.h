#pragma once
// A block of a row-major matrix of 2- or 4-byte elements written transposed into a small
// buffer (square tiles moved in SSE2 registers, x86-64's baseline), from which the column-wise
// casts (kernels/cpu/mx/mx_cast.h, kernels/cpu/fp8/fp8_block.h) quantize x^T without a transposed
// copy of the whole tensor.
#include <emmintrin.h>

#include <algorithm>
#include <cstdint>

namespace mantissa::kernels::mx {

// dst[c * ld_dst + r] = src[r * ld_src + c] for r < rows, c < cols.
template <typename T>
void transpose_block(const T* src, int64_t ld_src, int64_t rows, int64_t cols, T* dst,
                     int64_t ld_dst) {
  constexpr int64_t kTile = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t rn = std::min(kTile, rows - r0);
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t r = r0; r < r0 + rn; ++r) dst[c * ld_dst + r] = src[r * ld_src + c];
  }
}

// An 8 x 8 block of 16-bit elements (8 x 4 of 32-bit ones: 4 x 4 twice) in SSE2 registers.
inline void transpose8x8_u16(const uint16_t* src, int64_t ld_src, uint16_t* dst, int64_t ld_dst) {
  __m128i r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i)
    r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * ld_src));
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 0-3, then 4-7
    const __m128i* q = t + 4 * h;
    u[4 * h] = _mm_unpacklo_epi32(q[0], q[2]);      // columns 0, 1
    u[4 * h + 1] = _mm_unpackhi_epi32(q[0], q[2]);  // 2, 3
    u[4 * h + 2] = _mm_unpacklo_epi32(q[1], q[3]);  // 4, 5
    u[4 * h + 3] = _mm_unpackhi_epi32(q[1], q[3]);  // 6, 7
  }
  for (int i = 0; i < 4; ++i) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * i) * ld_dst),
                     _mm_unpacklo_epi64(u[i], u[4 + i]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * i + 1) * ld_dst),
                     _mm_unpackhi_epi64(u[i], u[4 + i]));
  }
}
inline void transpose4x4_u32(const uint32_t* src, int64_t ld_src, uint32_t* dst, int64_t ld_dst) {
  __m128i r[4];
  for (int i = 0; i < 4; ++i)
    r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * ld_src));
  const __m128i t0 = _mm_unpacklo_epi32(r[0], r[1]), t1 = _mm_unpackhi_epi32(r[0], r[1]);
  const __m128i t2 = _mm_unpacklo_epi32(r[2], r[3]), t3 = _mm_unpackhi_epi32(r[2], r[3]);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm_unpacklo_epi64(t0, t2));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + ld_dst), _mm_unpackhi_epi64(t0, t2));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * ld_dst), _mm_unpacklo_epi64(t1, t3));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 3 * ld_dst), _mm_unpackhi_epi64(t1, t3));
}

// transpose_block with square tiles of kSide moved in registers, the edges element by element.
template <typename T, int64_t kSide, typename Tile>
void transpose_block_tiled(const T* src, int64_t ld_src, int64_t rows, int64_t cols, T* dst,
                           int64_t ld_dst, Tile tile) {
  const int64_t rs = rows / kSide * kSide, cs = cols / kSide * kSide;
  for (int64_t r0 = 0; r0 < rs; r0 += kSide)
    for (int64_t c0 = 0; c0 < cs; c0 += kSide)
      tile(src + r0 * ld_src + c0, ld_src, dst + c0 * ld_dst + r0, ld_dst);
  if (cs < cols) transpose_block(src + cs, ld_src, rows, cols - cs, dst + cs * ld_dst, ld_dst);
  if (rs < rows) transpose_block(src + rs * ld_src, ld_src, rows - rs, cs, dst + rs, ld_dst);
}

// transpose_block of a float32 (4-byte) or 16-bit element buffer.
inline void transpose_block_bytes(const void* src, int64_t item, int64_t ld_src, int64_t rows,
                                  int64_t cols, void* dst, int64_t ld_dst) {
  if (item == 4)
    transpose_block_tiled<uint32_t, 4>(static_cast<const uint32_t*>(src), ld_src, rows, cols,
                                       static_cast<uint32_t*>(dst), ld_dst, transpose4x4_u32);
  else
    transpose_block_tiled<uint16_t, 8>(static_cast<const uint16_t*>(src), ld_src, rows, cols,
                                       static_cast<uint16_t*>(dst), ld_dst, transpose8x8_u16);
}

// transpose_block_bytes 8 rows at a time, fetching the row `ahead` rows further down while each
// is moved (rows of src past `rows` and up to `rows_after` of them lie in the matrix): a
// column strip of a tall matrix reads a line from each row, far apart, which the hardware
// prefetcher does not see coming.
inline void transpose_block_bytes_ahead(const void* src, int64_t item, int64_t ld_src, int64_t rows,
                                        int64_t cols, void* dst, int64_t ld_dst, int64_t rows_after,
                                        int64_t ahead = 32) {
  const auto* s = static_cast<const char*>(src);
  auto* d = static_cast<char*>(dst);
  const int64_t pitch = ld_src * item;
  for (int64_t r = 0; r < rows; r += 8) {
    const int64_t n = std::min<int64_t>(8, rows - r);
    for (int64_t p = r + ahead; p < std::min(r + ahead + n, rows + rows_after); ++p)
      __builtin_prefetch(s + p * pitch);
    transpose_block_bytes(s + r * pitch, item, ld_src, n, cols, d + r * item, ld_dst);
  }
}

}  // namespace mantissa::kernels::mx
