#pragma once
// Internal: the NVFP4 and MXFP4-SR bodies of the AVX2 level (nvfp4_rows_avx2.cpp,
// nvfp4_rows_bf16_avx2.cpp) and of the AVX-512 level (nvfp4_cast_avx512.cpp), which the levels'
// MxKernels (mx_cast_avx2.cpp, mx_cast_avx512.cpp) hold; each is the MxKernels member of its name
// (mx_cast.h).
#include <cstdint>

#include "kernels/cpu/mx/mx_cast.h"

namespace mantissa::kernels::mx::detail {

namespace avx2 {
void nvfp4_encode(const void* src, DType src_dtype, int64_t n, float tensor_scale,
                  const float* block_amax, uint8_t* codes, uint8_t* scales);
void nvfp4_encode_sr(const void* src, DType src_dtype, int64_t n, float tensor_scale,
                     const float* block_amax, uint64_t seed, uint64_t offset, int64_t row,
                     int64_t first_col, uint8_t* codes, uint8_t* scales);
MxStatsRun nvfp4_encode_stats(const void* src, DType src_dtype, int64_t n, float tensor_scale,
                              const float* block_amax, bool tile_records, bool stochastic,
                              uint64_t seed, uint64_t offset, int64_t row, int64_t first_col,
                              uint8_t* codes, uint8_t* scales);
void nvfp4_decode(const uint8_t* codes, const uint8_t* scales, int64_t n, float tensor_scale,
                  float* out);
float amax(const void* src, DType src_dtype, int64_t n);
void mxfp4_encode_sr(const void* src, DType src_dtype, int64_t n, uint64_t seed, uint64_t offset,
                     int64_t row, int64_t first_col, uint8_t* codes, uint8_t* scales);
// The bfloat16 round-to-nearest body (nvfp4_rows_bf16_avx2.cpp) of both levels: nvfp4_encode's
// (stats false) or nvfp4_encode_stats' (stats true, with its tile_records) cast of n bfloat16
// elements; lookup (AVX-512 BW/VL present) takes the E2M1 codes by vpermt2w lookups.
MxStatsRun nvfp4_encode_bf16(const uint16_t* src, int64_t n, float tensor_scale,
                             const float* block_amax_in, bool stats, bool tile_records, bool lookup,
                             uint8_t* codes, uint8_t* scales);
// nvfp4_encode_bf16 of `rows` rows (at most 16; ld elements, code_ld and scale_ld bytes apart) of
// n elements each that take the same tile amax (one 16x16 tile row's, its blocks' from the first
// column's): a group of 16 blocks' scale codes and records are made once for all the rows. The
// same bytes and statistics as a call of nvfp4_encode_bf16 per row.
MxStatsRun nvfp4_encode_bf16_tile_rows(const uint16_t* src, int64_t rows, int64_t n, int64_t ld,
                                       float tensor_scale, const float* tile_amax, bool stats,
                                       bool tile_records, bool lookup, uint8_t* codes,
                                       int64_t code_ld, uint8_t* scales, int64_t scale_ld);
// The same of a float32 source at the AVX2 level (nvfp4_rows_avx2.cpp): each group of 8 blocks'
// scales and factors made once for all the rows.
MxStatsRun nvfp4_encode_f32_tile_rows(const float* src, int64_t rows, int64_t n, int64_t ld,
                                      float tensor_scale, const float* tile_amax, bool stats,
                                      bool tile_records, uint8_t* codes, int64_t code_ld,
                                      uint8_t* scales, int64_t scale_ld);
}  // namespace avx2

namespace avx512 {
void nvfp4_encode(const void* src, DType src_dtype, int64_t n, float tensor_scale,
                  const float* block_amax, uint8_t* codes, uint8_t* scales);
void nvfp4_encode_sr(const void* src, DType src_dtype, int64_t n, float tensor_scale,
                     const float* block_amax, uint64_t seed, uint64_t offset, int64_t row,
                     int64_t first_col, uint8_t* codes, uint8_t* scales);
MxStatsRun nvfp4_encode_stats(const void* src, DType src_dtype, int64_t n, float tensor_scale,
                              const float* block_amax, bool tile_records, bool stochastic,
                              uint64_t seed, uint64_t offset, int64_t row, int64_t first_col,
                              uint8_t* codes, uint8_t* scales);
void nvfp4_decode(const uint8_t* codes, const uint8_t* scales, int64_t n, float tensor_scale,
                  float* out);
float amax(const void* src, DType src_dtype, int64_t n);
void mxfp4_encode_sr(const void* src, DType src_dtype, int64_t n, uint64_t seed, uint64_t offset,
                     int64_t row, int64_t first_col, uint8_t* codes, uint8_t* scales);
// avx2::nvfp4_encode_f32_tile_rows at the AVX-512 level (nvfp4_cast_avx512.cpp): each group of 16
// blocks' scales and factors made once for all the rows.
MxStatsRun nvfp4_encode_f32_tile_rows(const float* src, int64_t rows, int64_t n, int64_t ld,
                                      float tensor_scale, const float* tile_amax, bool stats,
                                      bool tile_records, uint8_t* codes, int64_t code_ld,
                                      uint8_t* scales, int64_t scale_ld);
}  // namespace avx512

// The rows of one 16x16 tile row (the nvfp4_encode_*_tile_rows): where they share their groups,
// the groups made once (prepare(shared)) and each row cast from them (row(r, shared)), else each
// row cast alone (own(r)); their statistics appended in row order. These helpers are inlined into
// each level's body, so that its lambdas, built for the level's ISA, are inlined there too.
template <class Shared, class Own, class Prepare, class Row>
[[gnu::always_inline]] inline MxStatsRun nvfp4_tile_rows(int64_t rows, bool share, Own own,
                                                         Prepare prepare, Row row) {
  MxStatsRun run;
  if (!share) {
    for (int64_t r = 0; r < rows; ++r) run.append(own(r));
    return run;
  }
  Shared shared;
  prepare(shared);
  for (int64_t r = 0; r < rows; ++r) run.append(row(r, static_cast<const Shared&>(shared)));
  return run;
}

// A float32 tile row's shared groups 0..groups-1 made by prepare(q, out.group[q]) from the tile
// amax, and the first row's scales, which they write.
template <class Shared, class Prepare>
[[gnu::always_inline]] inline void nvfp4_share_groups(Shared& out, int64_t groups,
                                                      const uint8_t* scales, Prepare prepare) {
  out.scales = scales;
  for (int64_t q = 0; q < groups; ++q) prepare(q, out.group[q]);
}

// cast.operator()<kStats, kTileRecords>() with a tile-rows cast's statistics setting as template
// arguments: statistics with records from the tiles' own amax, statistics, or none.
template <class Cast>
[[gnu::always_inline]] inline MxStatsRun nvfp4_with_stats(bool stats, bool tile_records,
                                                          Cast cast) {
  if (stats && tile_records) return cast.template operator()<true, true>();
  if (stats) return cast.template operator()<true, false>();
  return cast.template operator()<false, false>();
}

}  // namespace mantissa::kernels::mx::detail
