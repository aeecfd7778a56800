#pragma once
// The band walk shared by the AVX2 MX column casts (mx_columns_fp8_avx2.cpp,
// mx_columns_e2m1_avx2.cpp): a band of 32 rows read as it lies, in chunks of columns (kChunkBytes
// of the band), each chunk's next fetched into L2 while it is encoded (Ahead), the columns beyond
// the vectors' steps by the scalar body; and the per-column steps both formats take (scales8,
// record_columns). A file includes it last, after stream_codes.h, <omp.h>, mx_blocks_avx2.h and
// after `#pragma GCC target("avx2,fma,f16c")`, so that no library code is built for the ISA.

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;

// The bytes of a band's chunk: its 32 rows are read once from memory and once from L2.
constexpr int64_t kChunkBytes = 256 * 1024;

// The next chunk, fetched into L2 a line with each 64 bytes of source the current chunk's
// second pass reads (a burst of fetches is dropped where the miss buffers are full), so that its
// first pass reads from L2.
struct Ahead {
  const char* at = nullptr;       // the next line
  const char* row_end = nullptr;  // the end of at's row's bytes to fetch
  int64_t row_bytes = 0;
  int64_t ld_bytes = 0;
  int rows = 0;  // rows left to fetch, at's among them; 0: nothing to fetch
  [[gnu::always_inline]] void next() { next_lines<1>(); }
  // kN lines at once (a row's last call may fetch lines past its end: a hint, never a fault).
  template <int kN>
  [[gnu::always_inline]] void next_lines() {
    if (rows <= 0) return;
#pragma GCC unroll 4
    for (int i = 0; i < kN; ++i) _mm_prefetch(at + 64 * i, _MM_HINT_T1);
    at += 64 * kN;
    if (at >= row_end) {
      row_end += ld_bytes;
      at = row_end - row_bytes;
      --rows;
    }
  }
};

// The scales of 8 columns from their amax bits (float32 bits, NaN above 0x7F800000), written to
// scale[0..7], their multipliers to mul[0..7].
template <Element E, E8m0Rounding R>
[[gnu::always_inline]] inline void scales8(__m256i bits, uint8_t* scale, float* mul) {
  alignas(8) uint8_t s[8];
  all_block_scales8<E, R>(bits, s, mul);
  std::memcpy(scale, s, 8);
}

// Each column's MxStatsRun record of a block cast in the lanes (amax bits finite).
template <Element E, DType::Id kSrc>
[[gnu::always_inline]] inline void record_columns(MxStatsRun* runs, const uint32_t* bits,
                                                  const uint8_t* s, const float* mul, int n,
                                                  unsigned fallback) {
  for (int j = 0; j < n; ++j)
    if (!((fallback >> j) & 1u)) record_block<E, kSrc>(runs[j], nullptr, 0, bits[j], s[j], mul[j]);
}

// One chunk of a band, as the walk hands it to a format's body: n rows (ld elements apart) from
// `band`, columns c0..c0 + width - 1 (whole vector steps), the band's codes (code_row bytes a row)
// and scale row, the statistics' runs (null: none) and counts, the next chunk's fetch, and whether
// the codes go past the caches.
struct ColumnChunk {
  const void* band;
  int64_t ld;
  int n;
  int64_t c0, width;
  uint8_t* codes;
  int64_t code_row;
  uint8_t* scale_row;
  MxStatsRun* runs;
  int64_t* saturated;
  int64_t* flushed;
  Ahead ahead;
  bool stream;
};

// encode_column_band's walk for one element format and source dtype: the band's block rows one
// at a time, their columns in chunks of kChunkBytes of the band, each given to body(ColumnChunk)
// (the vectors take whole steps of `step` columns: a multiple of 32), the last columns to the
// scalar body. The codes go past the caches (ColumnChunk::stream; E2M1's rceil body, in float32
// lanes, stores them as before) where the cast's codes reach the cast-wide threshold and each
// row's 32-byte steps are aligned; mx_quantize_columns runs its bands one a thread, so the cast's
// codes are about this band's times the team's size.
template <Element E, E8m0Rounding R, bool kStats, DType::Id kSrc, class Body>
void walk_column_bands(const void* src, int64_t rows, int64_t cols, uint8_t* codes, uint8_t* scales,
                       MxStatsRun* runs, int64_t step, Body&& body) {
  constexpr int64_t kItem = kSrc == DType::Id::f32 ? 4 : 2;
  constexpr int64_t kWidth = kChunkBytes / (kMxBlock * kItem);
  const DType dtype{kSrc};
  const int64_t code_row = code_bytes(E, cols);
  const int64_t vec_cols = cols / step * step;
  int64_t saturated = 0, flushed = 0;
  const bool stream = rows * code_row * omp_get_num_threads() >= kStreamCodesFrom &&
                      reinterpret_cast<uintptr_t>(codes) % 32 == 0 && code_row % 32 == 0;
  for (int64_t r0 = 0; r0 < rows; r0 += kMxBlock) {
    const int n = static_cast<int>(std::min(kMxBlock, rows - r0));
    const void* band = at(src, dtype, r0 * cols);
    uint8_t* c = codes + r0 * code_row;
    uint8_t* s = scales + r0 / kMxBlock * cols;
    for (int64_t c0 = 0; c0 < vec_cols; c0 += kWidth) {
      const int64_t w = std::min(kWidth, vec_cols - c0);
      // The next chunk: the band's next columns, or the next band's first.
      Ahead ahead;
      const int64_t next_r0 = c0 + w < vec_cols ? r0 : r0 + kMxBlock;
      const int64_t next_c0 = c0 + w < vec_cols ? c0 + w : 0;
      if (next_r0 < rows) {
        ahead.at = static_cast<const char*>(at(src, dtype, next_r0 * cols + next_c0));
        ahead.row_bytes = std::min(kWidth, vec_cols - next_c0) * kItem;
        ahead.row_end = ahead.at + ahead.row_bytes;
        ahead.ld_bytes = cols * kItem;
        ahead.rows = static_cast<int>(std::min(kMxBlock, rows - next_r0));
      }
      body(ColumnChunk{band, cols, n, c0, w, c, code_row, s, kStats ? runs : nullptr, &saturated,
                       &flushed, ahead, stream});
    }
    if (vec_cols < cols) {
      for (int k = 0; k < n; ++k)  // E2M1 codes go into their nibbles
        std::fill(c + k * code_row + code_bytes(E, vec_cols), c + (k + 1) * code_row, uint8_t{0});
      for (int64_t j = vec_cols; j < cols; ++j)
        encode_column_block_scalar(band, dtype, cols, n, j, E, R, c, code_row, s + j,
                                   kStats ? runs + j : nullptr);
    }
  }
  if (stream) _mm_sfence();
  if constexpr (kStats) {
    runs[0].saturated += saturated;
    runs[0].flushed += flushed;
  }
}

// Calls f.template operator()<kStats, kSrc>() for the band's statistics (runs non-null) and
// source dtype (bfloat16 or float32).
template <class F>
void for_stats_and_dtype(DType dtype, const MxStatsRun* runs, F&& f) {
  if (dtype == kBFloat16) {
    if (runs)
      f.template operator()<true, DType::Id::bf16>();
    else
      f.template operator()<false, DType::Id::bf16>();
  } else if (runs) {
    f.template operator()<true, DType::Id::f32>();
  } else {
    f.template operator()<false, DType::Id::f32>();
  }
}

}  // namespace
}  // namespace mantissa::kernels::mx::detail
