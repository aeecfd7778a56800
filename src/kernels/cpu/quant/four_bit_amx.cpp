// The 4-bit Linear's forward and input-gradient products on AMX tiles (four_bit_amx.h).
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/cpu/quant/four_bit_amx.h"

#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/bf16_rne_avx512.h"
#include "kernels/cpu/onednn/tiled_b_pack.h"
#include "kernels/cpu/quant/four_bit.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/error.h"

#define MANTISSA_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl")))
#define MANTISSA_AVX512BW __attribute__((target("avx512f,avx512bw,avx512vl")))

namespace mantissa::kernels::quant {
namespace {

// Linux keeps the 8 KiB of tile data out of a process's saved state until it asks for it.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

// The forward's tile registers: 0-3 accumulate a 16 x 64 block of y^T, 4 holds 16 rows x 32 k
// of W, 5-7 take 32 k x 16 columns of x^T in turn. Every tile is configured 16 rows x 64 bytes.
constexpr int kRows = 16;       // rows of W per panel (the tiles' row count)
constexpr int kChunkCols = 64;  // columns of y^T (rows of x) per pass: four accumulator tiles

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

MANTISSA_AMX void load_tile_config() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = kRows;
  }
  // GCC 12 drops the stores above as dead without this: it does not see _tile_loadconfig read
  // them (found with a faulting LDTILECFG).
  asm volatile("" : : "r"(&config) : "memory");
  _tile_loadconfig(&config);
}

// c (16 x 64 fp32, row stride 64) += a (16 x kp bf16, row stride kp) @ b over k tiles
// [kt0, kt1), with b `Tiles` column tiles of x^T in the tiled layout (Bf16TiledB): k tile kt at
// b + kt * k_tile_stride, the column tile j 32 elements further on, its k-pair rows 128
// elements apart. The sums start from zero when kt0 is 0, else from c.
template <int Tiles>
MANTISSA_AMX void panel_product(const uint16_t* a, int64_t kp, const uint16_t* b,
                                int64_t k_tile_stride, int64_t kt0, int64_t kt1, float* c) {
  constexpr int kStrideB = Bf16TiledB::kTileN * 2 * 2;  // bytes between k-pair rows
  constexpr int kStrideC = kChunkCols * 4;
  if (kt0 == 0) {
    _tile_zero(0);
    if constexpr (Tiles > 1) _tile_zero(1);
    if constexpr (Tiles > 2) _tile_zero(2);
    if constexpr (Tiles > 3) _tile_zero(3);
  } else {
    _tile_loadd(0, c, kStrideC);
    if constexpr (Tiles > 1) _tile_loadd(1, c + 16, kStrideC);
    if constexpr (Tiles > 2) _tile_loadd(2, c + 32, kStrideC);
    if constexpr (Tiles > 3) _tile_loadd(3, c + 48, kStrideC);
  }
  for (int64_t kt = kt0; kt < kt1; ++kt) {
    const uint16_t* bt = b + kt * k_tile_stride;
    _tile_loadd(4, a + kt * Bf16TiledB::kTileK, kp * 2);
    _tile_loadd(5, bt, kStrideB);
    _tile_dpbf16ps(0, 4, 5);
    if constexpr (Tiles > 1) {
      _tile_loadd(6, bt + 32, kStrideB);
      _tile_dpbf16ps(1, 4, 6);
    }
    if constexpr (Tiles > 2) {
      _tile_loadd(7, bt + 64, kStrideB);
      _tile_dpbf16ps(2, 4, 7);
    }
    if constexpr (Tiles > 3) {
      _tile_loadd(5, bt + 96, kStrideB);
      _tile_dpbf16ps(3, 4, 5);
    }
  }
  _tile_stored(0, c, kStrideC);
  if constexpr (Tiles > 1) _tile_stored(1, c + 16, kStrideC);
  if constexpr (Tiles > 2) _tile_stored(2, c + 32, kStrideC);
  if constexpr (Tiles > 3) _tile_stored(3, c + 48, kStrideC);
}

// y rows [0, cols) of the pass, columns [0, n_rows) of the panel: y[j][i] = c[i][j] (+ bias[i]),
// rounded to bf16.
MANTISSA_AVX512BW void store_transposed(const float* c, int64_t cols, int n_rows, const float* bias,
                                        uint16_t* y, int64_t ldy) {
  const __m512i offsets =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(kChunkCols));
  const __mmask16 mask =
      n_rows >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << n_rows) - 1);
  const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias) : _mm512_setzero_ps();
  for (int64_t j = 0; j < cols; ++j) {
    __m512 v = _mm512_i32gather_ps(offsets, c + j, 4);
    if (bias) v = _mm512_add_ps(v, b);
    _mm256_mask_storeu_epi16(y + j * ldy, mask,
                             _mm512_cvtepi32_epi16(bf16_rne(_mm512_castps_si512(v))));
  }
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
// A 64-byte aligned buffer of count Ts, zeroed only when asked: the packers and the tile
// stores write every element the kernels read, except the padding of the decoded rows and of
// g's copy.
enum class Fill { kNone, kZeros };
template <typename T>
std::unique_ptr<T[], FreeDeleter> aligned_buffer(int64_t count, Fill fill) {
  const size_t bytes = (static_cast<size_t>(count) * sizeof(T) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes);
  if (!p) throw std::bad_alloc();
  if (fill == Fill::kZeros) std::memset(p, 0, bytes);
  return std::unique_ptr<T[], FreeDeleter>(static_cast<T*>(p));
}

// The tiled layout (Bf16TiledB) with the n tiles of one k tile side by side, k tiles after one
// another: both kernels' packed operand.
Bf16TiledB k_major_layout(int64_t k_tiles, int64_t n_tiles) {
  Bf16TiledB t;
  t.k_tiles = k_tiles;
  t.n_tiles = n_tiles;
  t.n_tile_stride = Bf16TiledB::kTileElements;
  t.k_tile_stride = n_tiles * Bf16TiledB::kTileElements;
  t.elements = k_tiles * t.k_tile_stride;
  return t;
}

// Panels of W decoded together: their rows (64 x kp bf16) sit in L2 while the slices of x^T
// below pass through L1 once per group instead of once per panel.
constexpr int64_t kGroupPanels = 4;
// Bytes of x^T per K slice: with the panel's A tiles it stays in L1 (48 KiB on the AMX Xeons).
// In a standalone loop, tile loads from L1 ran at 6.7 ns per product (one 16 x 16 x 32
// TDPBF16PS with its loads) against 13 ns from L2; in this kernel the slicing took the
// 64 x 784 x 1024 forward from 110 to 107 us (the A tiles of the group still come from L2).
constexpr int64_t kSliceBytes = 24 << 10;

MANTISSA_AMX void product(int tiles, const uint16_t* a, int64_t kp, const uint16_t* b,
                          int64_t k_tile_stride, int64_t kt0, int64_t kt1, float* c) {
  switch (tiles) {
    case 1:
      panel_product<1>(a, kp, b, k_tile_stride, kt0, kt1, c);
      break;
    case 2:
      panel_product<2>(a, kp, b, k_tile_stride, kt0, kt1, c);
      break;
    case 3:
      panel_product<3>(a, kp, b, k_tile_stride, kt0, kt1, c);
      break;
    default:
      panel_product<4>(a, kp, b, k_tile_stride, kt0, kt1, c);
      break;
  }
}

// Panels [p_begin, p_end) of W on this thread, kGroupPanels at a time: the group's rows decoded
// into a (padding columns zero), then for each pass of x^T (64 of its columns) and each K slice,
// every panel of the group accumulates its 16 x 64 block of y^T in c, and the finished blocks
// are stored transposed into y.
MANTISSA_AMX void thread_panels(const FourBitMatrix& w, const uint16_t* xt, const Bf16TiledB& t,
                                int64_t m, const uint16_t* bias, uint16_t* y, int64_t p_begin,
                                int64_t p_end) {
  if (p_begin >= p_end) return;
  const int64_t n = w.rows, k = w.cols, kp = t.k_tiles * Bf16TiledB::kTileK;
  const auto a = aligned_buffer<uint16_t>(kGroupPanels * kRows * kp, Fill::kZeros);  // K padding
  const auto c = aligned_buffer<float>(kGroupPanels * kRows * kChunkCols, Fill::kNone);
  float bias_rows[kGroupPanels * kRows] = {};
  load_tile_config();
  for (int64_t g0 = p_begin; g0 < p_end; g0 += kGroupPanels) {
    const int64_t r0 = g0 * kRows;
    const int64_t rows = std::min<int64_t>(std::min(p_end - g0, kGroupPanels) * kRows, n - r0);
    const int64_t panels = (rows + kRows - 1) / kRows;
    for (int64_t i = 0; i < rows; ++i)
      dequantize_4bit_16(w.packed, w.absmax, (r0 + i) * k, k, w.blocksize, w.format, true,
                         a.get() + i * kp);
    for (int64_t i = rows; i < panels * kRows; ++i) std::fill_n(a.get() + i * kp, k, uint16_t{0});
    if (bias)
      for (int64_t i = 0; i < rows; ++i) bias_rows[i] = bf16_bits_to_float(bias[r0 + i]);
    for (int64_t pass = 0; pass < t.n_tiles; ++pass) {
      const int64_t cols = std::min<int64_t>(kChunkCols, m - pass * kChunkCols);
      const int tiles = static_cast<int>((cols + 15) / 16);
      const int64_t slice = std::max<int64_t>(1, kSliceBytes / (tiles * 1024));
      const uint16_t* b = xt + pass * t.n_tile_stride;
      for (int64_t kt0 = 0; kt0 < t.k_tiles; kt0 += slice)
        for (int64_t p = 0; p < panels; ++p)
          product(tiles, a.get() + p * kRows * kp, kp, b, t.k_tile_stride, kt0,
                  std::min(t.k_tiles, kt0 + slice), c.get() + p * kRows * kChunkCols);
      for (int64_t p = 0; p < panels; ++p)
        store_transposed(c.get() + p * kRows * kChunkCols, cols,
                         static_cast<int>(std::min<int64_t>(kRows, rows - p * kRows)),
                         bias ? bias_rows + p * kRows : nullptr,
                         y + pass * kChunkCols * n + r0 + p * kRows, n);
    }
  }
  _tile_release();
}

// The input gradient's products: rows of W per decoded panel (8 k tiles of 32), and the block of
// dx one tile loop computes (2 x 2 tiles of 16 x 16: tiles 0-3 accumulate, 4-5 hold g, 6-7 W).
constexpr int64_t kGradPanelRows = 256;

// c (MT x NT tiles of 16 x 16 fp32, row stride ldc bytes) += a (MT x 16 rows of g, 32 k per
// tile, row stride lda bytes) @ b over k tiles [0, kts) of the panel, b being NT 16-column tiles
// of the packed W panel (k tile kt at b + kt * k_tile_stride). Sums start from zero when first.
template <int MT, int NT>
MANTISSA_AMX void grad_block(const uint16_t* a, int64_t lda, const uint16_t* b,
                             int64_t k_tile_stride, int64_t kts, float* c, int64_t ldc,
                             bool first) {
  constexpr int kStrideB = Bf16TiledB::kTileN * 2 * 2;
  float* c1 = c + ldc / 4 * 16;  // the second row of tiles
  if (first) {
    _tile_zero(0);
    if constexpr (NT > 1) _tile_zero(1);
    if constexpr (MT > 1) _tile_zero(2);
    if constexpr (MT > 1 && NT > 1) _tile_zero(3);
  } else {
    _tile_loadd(0, c, ldc);
    if constexpr (NT > 1) _tile_loadd(1, c + 16, ldc);
    if constexpr (MT > 1) _tile_loadd(2, c1, ldc);
    if constexpr (MT > 1 && NT > 1) _tile_loadd(3, c1 + 16, ldc);
  }
  for (int64_t kt = 0; kt < kts; ++kt) {
    const uint16_t* bt = b + kt * k_tile_stride;
    const uint16_t* at = a + kt * Bf16TiledB::kTileK;
    _tile_loadd(4, at, lda);
    _tile_loadd(6, bt, kStrideB);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NT > 1) {
      _tile_loadd(7, bt + 32, kStrideB);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (MT > 1) {
      _tile_loadd(5, at + lda / 2 * 16, lda);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (NT > 1) _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, c, ldc);
  if constexpr (NT > 1) _tile_stored(1, c + 16, ldc);
  if constexpr (MT > 1) _tile_stored(2, c1, ldc);
  if constexpr (MT > 1 && NT > 1) _tile_stored(3, c1 + 16, ldc);
}

MANTISSA_AMX void grad_block(int mt, int nt, const uint16_t* a, int64_t lda, const uint16_t* b,
                             int64_t k_tile_stride, int64_t kts, float* c, int64_t ldc,
                             bool first) {
  if (mt == 2 && nt == 2) return grad_block<2, 2>(a, lda, b, k_tile_stride, kts, c, ldc, first);
  if (mt == 2) return grad_block<2, 1>(a, lda, b, k_tile_stride, kts, c, ldc, first);
  if (nt == 2) return grad_block<1, 2>(a, lda, b, k_tile_stride, kts, c, ldc, first);
  grad_block<1, 1>(a, lda, b, k_tile_stride, kts, c, ldc, first);
}

// Rows [0, m) of the fp32 sums c (row stride ldc floats), `width` columns, rounded to bf16 into
// dx (row stride ldx).
MANTISSA_AVX512BW void store_rounded(const float* c, int64_t ldc, int64_t m, int64_t width,
                                     uint16_t* dx, int64_t ldx) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < width; j += 16) {
      const int64_t left = std::min<int64_t>(16, width - j);
      const __mmask16 mask =
          left >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << left) - 1);
      const __m512 v = _mm512_maskz_loadu_ps(mask, c + i * ldc + j);
      _mm256_mask_storeu_epi16(dx + i * ldx + j, mask,
                               _mm512_cvtepi32_epi16(bf16_rne(_mm512_castps_si512(v))));
    }
}

// Columns [c0, c1) of dx = g @ W on this thread (a: g, or its zero-padded copy, row stride lda
// elements, at least 16-row and 32-column multiples readable). W's rows are taken 256 at a time:
// decoded (only these columns) 32 rows at a time into a buffer in L1, packed into the k-pair
// tile layout, then every 2 x 2 block of tiles of dx accumulates the panel's k tiles; the fp32
// sums stay in c between panels and are rounded once at the end.
MANTISSA_AMX void thread_input_grad(const FourBitMatrix& w, const uint16_t* a, int64_t lda,
                                    int64_t m, int64_t c0, int64_t c1, uint16_t* dx) {
  const int64_t width = c1 - c0;
  if (width <= 0) return;
  const Bf16TiledB t = k_major_layout(kGradPanelRows / Bf16TiledB::kTileK,
                                      (width + Bf16TiledB::kTileN - 1) / Bf16TiledB::kTileN);
  const int64_t m_tiles = (m + 15) / 16, n_tiles = (width + 15) / 16;
  const int64_t ldc = t.n_tiles * Bf16TiledB::kTileN;
  const auto tiles = aligned_buffer<uint16_t>(t.elements, Fill::kNone);
  const auto rows = aligned_buffer<uint16_t>(Bf16TiledB::kTileK * width, Fill::kNone);
  const auto c = aligned_buffer<float>(m_tiles * 16 * ldc, Fill::kNone);
  load_tile_config();
  for (int64_t r0 = 0; r0 < w.rows; r0 += kGradPanelRows) {
    const int64_t panel_rows = std::min(kGradPanelRows, w.rows - r0);
    const int64_t kts = (panel_rows + Bf16TiledB::kTileK - 1) / Bf16TiledB::kTileK;
    for (int64_t kt = 0; kt < kts; ++kt) {
      const int64_t k0 = r0 + kt * Bf16TiledB::kTileK;
      const int64_t n_rows = std::min<int64_t>(Bf16TiledB::kTileK, r0 + panel_rows - k0);
      for (int64_t i = 0; i < n_rows; ++i)
        dequantize_4bit_16(w.packed, w.absmax, (k0 + i) * w.cols + c0, width, w.blocksize, w.format,
                           true, rows.get() + i * width);
      pack_bf16_k_tile(rows.get(), width, n_rows, width, t, kt, tiles.get());
    }
    for (int64_t mt = 0; mt < m_tiles; mt += 2)
      for (int64_t nt = 0; nt < n_tiles; nt += 2)
        grad_block(static_cast<int>(std::min<int64_t>(2, m_tiles - mt)),
                   static_cast<int>(std::min<int64_t>(2, n_tiles - nt)), a + mt * 16 * lda + r0,
                   lda * 2, tiles.get() + (nt / 4) * t.n_tile_stride + (nt % 4) * 32,
                   t.k_tile_stride, kts, c.get() + mt * 16 * ldc + nt * 16, ldc * 4, r0 == 0);
  }
  _tile_release();
  store_rounded(c.get(), ldc, m, width, dx + c0, w.cols);
}

bool request_tile_state() {
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

}  // namespace

bool amx_bf16_usable() {
  // Asked once per process: Linux grants the tile state to every thread of it.
  // The kernels' own vector code is AVX-512 (decode, gathers, masked stores): off at lower levels,
  // so MANTISSA_DISABLE_SIMD=avx512f runs the layer as on an AVX2 CPU.
  static const bool granted =
      cpu_features().amx_bf16 && simd_level() >= SimdLevel::kAvx512 && request_tile_state();
  return granted;
}

void four_bit_forward_amx(const FourBitMatrix& w, const uint16_t* x, int64_t m,
                          const uint16_t* bias, uint16_t* y) {
  // A tile instruction without the granted state is SIGILL; the check also makes the request.
  MANTISSA_CHECK(amx_bf16_usable(), "four_bit_forward_amx",
                 "this CPU or kernel offers no AMX bf16 tiles");
  const int64_t n = w.rows, k = w.cols;
  if (m <= 0 || n <= 0) return;
  const Bf16TiledB t = k_major_layout((k + Bf16TiledB::kTileK - 1) / Bf16TiledB::kTileK,
                                      (m + kChunkCols - 1) / kChunkCols);
  const auto xt = aligned_buffer<uint16_t>(t.elements, Fill::kNone);
  const int64_t panels = (n + kRows - 1) / kRows;
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int64_t pass = 0; pass < t.n_tiles; ++pass)
      pack_bf16_n_tile_transposed(x + pass * kChunkCols * k, k,
                                  std::min<int64_t>(kChunkCols, m - pass * kChunkCols), k, t, pass,
                                  xt.get());
    const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    thread_panels(w, xt.get(), t, m, bias, y, panels * me / threads, panels * (me + 1) / threads);
  }
}

void four_bit_input_grad_amx(const FourBitMatrix& w, const uint16_t* g, int64_t m, uint16_t* dx) {
  MANTISSA_CHECK(amx_bf16_usable(), "four_bit_input_grad_amx",
                 "this CPU or kernel offers no AMX bf16 tiles");
  const int64_t out_f = w.rows, in_f = w.cols;
  if (m <= 0 || in_f <= 0) return;
  if (out_f == 0) {
    std::fill_n(dx, m * in_f, uint16_t{0});
    return;
  }
  // g's tiles read 16 rows x 32 columns: a copy with zeros around it unless g has those shapes.
  const int64_t mp = (m + 15) / 16 * 16, kp = (out_f + 31) / 32 * 32;
  std::unique_ptr<uint16_t[], FreeDeleter> padded;
  const uint16_t* a = g;
  if (mp != m || kp != out_f) {
    padded = aligned_buffer<uint16_t>(mp * kp, Fill::kZeros);
    for (int64_t i = 0; i < m; ++i) std::copy_n(g + i * out_f, out_f, padded.get() + i * kp);
    a = padded.get();
  }
  const int64_t blocks = (in_f + Bf16TiledB::kTileN - 1) / Bf16TiledB::kTileN;
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t c0 = std::min(in_f, blocks * me / threads * Bf16TiledB::kTileN);
    const int64_t c1 = std::min(in_f, blocks * (me + 1) / threads * Bf16TiledB::kTileN);
    thread_input_grad(w, a, kp, m, c0, c1, dx);
  }
}

}  // namespace mantissa::kernels::quant
