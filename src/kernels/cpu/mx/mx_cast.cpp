// The scalar bodies of the block-format casts (the reference every SIMD level matches) and the
// dispatcher that checks the arguments, picks the level and splits the rows into segments over
// threads.
#include "kernels/cpu/mx/mx_cast.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/common/stream_codes.h"
#include "kernels/cpu/mx/nvfp4_cast_levels.h"
#include "kernels/cpu/mx/philox.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::mx {
namespace detail {
namespace {

using namespace scalar;

const float* fp8_values(Element e) {
  static const auto tables = [] {
    std::array<std::array<float, 256>, 2> t{};
    for (int c = 0; c < 256; ++c) {
      t[0][c] = e4m3_value(static_cast<uint8_t>(c));
      t[1][c] = e5m2_value(static_cast<uint8_t>(c));
    }
    return t;
  }();
  return e == Element::kE4m3 ? tables[0].data() : tables[1].data();
}

float clamp_to(float y, float max) { return y < -max ? -max : (y > max ? max : y); }

// Writes code c of segment element i (segments start at an even element).
void put_code(uint8_t* codes, int64_t i, uint8_t c, Element e) {
  if (e != Element::kE2m1) {
    codes[i] = c;
  } else if ((i & 1) == 0) {
    codes[i / 2] = c;
  } else {
    codes[i / 2] = static_cast<uint8_t>(codes[i / 2] | (c << 4));
  }
}

void mx_encode_scalar(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r,
                      uint8_t* codes, uint8_t* scales) {
  const ElementLimits lim = element_limits(e);
  for (int64_t begin = 0; begin < n; begin += kMxBlock) {
    const int64_t end = std::min(begin + kMxBlock, n);
    const float amax = block_amax(src, dtype, begin, end - begin);
    const uint8_t s = e8m0_scale(amax, e, r);
    scales[begin / kMxBlock] = s;
    const float divisor = floor_divisor(s);
    const float multiplier = rceil_multiplier(s, amax, lim.max);
    for (int64_t i = begin; i < end; ++i) {
      const float x = load(src, dtype, i);
      float y;
      if (r == E8m0Rounding::kFloor) {
        y = x / divisor;  // torchao divides; FP8 clamps, E2M1 saturates in its own cast
        if (e != Element::kE2m1) y = clamp_to(y, lim.max);
      } else {
        y = clamp_to(times(x, multiplier), lim.max);
      }
      put_code(codes, i, e == Element::kE2m1 ? e2m1_code(y) : fp8_code(y, e), e);
    }
  }
}

void mx_decode_scalar(const uint8_t* codes, const uint8_t* scales, int64_t n, Element e,
                      float* out) {
  const float* fp8 = e == Element::kE2m1 ? nullptr : fp8_values(e);
  for (int64_t i = 0; i < n; ++i) {
    const float s = e8m0_value(scales[i / kMxBlock]);
    const float v = fp8 ? fp8[codes[i]] : kE2m1Values[(codes[i / 2] >> ((i & 1) * 4)) & 0xF];
    out[i] = v * s;
  }
}

void nvfp4_encode_scalar(const void* src, DType dtype, int64_t n, float tensor_scale,
                         const float* block_amax_in, uint8_t* codes, uint8_t* scales) {
  for (int64_t begin = 0; begin < n; begin += kNvfp4Block) {
    const int64_t end = std::min(begin + kNvfp4Block, n);
    const int64_t b = begin / kNvfp4Block;
    const float amax =
        block_amax_in ? block_amax_in[b] : block_amax(src, dtype, begin, end - begin);
    const Nvfp4BlockScale bs = nvfp4_block_scale(amax, tensor_scale);
    scales[b] = bs.code;
    for (int64_t i = begin; i < end; ++i)
      put_code(codes, i, e2m1_code(nvfp4_scaled(load(src, dtype, i), bs.factor)), Element::kE2m1);
  }
}

void nvfp4_decode_scalar(const uint8_t* codes, const uint8_t* scales, int64_t n, float tensor_scale,
                         float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = tensor_scale * e4m3_value(scales[i / kNvfp4Block]);
    out[i] = kE2m1Values[(codes[i / 2] >> ((i & 1) * 4)) & 0xF] * s;
  }
}

float amax_scalar(const void* src, DType dtype, int64_t n) { return block_amax(src, dtype, 0, n); }

void nvfp4_encode_sr_scalar(const void* src, DType dtype, int64_t n, float tensor_scale,
                            const float* block_amax_in, uint64_t seed, uint64_t offset, int64_t row,
                            int64_t first_col, uint8_t* codes, uint8_t* scales) {
  std::array<PhiloxCounter, 16> words{};  // the 16 counter blocks of 256-column group `group`
  int64_t group = -1;
  for (int64_t begin = 0; begin < n; begin += kNvfp4Block) {
    const int64_t end = std::min(begin + kNvfp4Block, n);
    const int64_t b = begin / kNvfp4Block;
    const float amax =
        block_amax_in ? block_amax_in[b] : block_amax(src, dtype, begin, end - begin);
    const Nvfp4BlockScale bs = nvfp4_block_scale(amax, tensor_scale);
    scales[b] = bs.code;
    for (int64_t i = begin; i < end; ++i) {
      const auto col = static_cast<uint64_t>(first_col + i);
      if (static_cast<int64_t>(col >> 8) != group) {
        group = static_cast<int64_t>(col >> 8);
        for (uint64_t l = 0; l < 16; ++l)
          words[l] =
              philox4x32_10(sr_counter(sr_group_block(col) + l, static_cast<uint64_t>(row), offset),
                            sr_key(seed));
      }
      const float y = nvfp4_scaled(load(src, dtype, i), bs.factor);
      const uint8_t random = sr_byte_of(words[col & 15][sr_word_index(col)], col);
      put_code(codes, i, e2m1_code_stochastic(y, random), Element::kE2m1);
    }
  }
}

void mx_encode_column_band_scalar(const void* src, DType dtype, int64_t rows, int64_t cols,
                                  Element e, E8m0Rounding r, uint8_t* codes, uint8_t* scales,
                                  MxStatsRun* runs) {
  const int64_t code_row = code_bytes(e, cols);
  std::fill_n(codes, rows * code_row, uint8_t{0});  // E2M1 codes go into their nibbles
  for (int64_t r0 = 0; r0 < rows; r0 += kMxBlock) {
    const void* band =
        static_cast<const char*>(src) + r0 * cols * static_cast<int64_t>(dtype.itemsize());
    const int64_t n = std::min(kMxBlock, rows - r0);
    for (int64_t c = 0; c < cols; ++c)
      encode_column_block_scalar(band, dtype, cols, n, c, e, r, codes + r0 * code_row, code_row,
                                 scales + r0 / kMxBlock * cols + c, runs ? runs + c : nullptr);
  }
}

}  // namespace

const MxKernels kScalarKernels = {.encode = mx_encode_scalar,
                                  .decode = mx_decode_scalar,
                                  .nvfp4_encode = nvfp4_encode_scalar,
                                  .nvfp4_encode_sr = nvfp4_encode_sr_scalar,
                                  .nvfp4_decode = nvfp4_decode_scalar,
                                  .amax = amax_scalar,
                                  .encode_column_band = mx_encode_column_band_scalar};

void encode_column_block_scalar(const void* src, DType dtype, int64_t ld, int64_t n, int64_t c,
                                Element e, E8m0Rounding r, uint8_t* codes, int64_t code_row,
                                uint8_t* scale, MxStatsRun* run) {
  alignas(64) float column[kMxBlock] = {};  // float32 or bfloat16 elements
  alignas(64) uint8_t out[kMxBlock];
  const auto item = static_cast<int64_t>(dtype.itemsize());
  for (int64_t k = 0; k < n; ++k)
    std::memcpy(reinterpret_cast<char*>(column) + k * item,
                static_cast<const char*>(src) + (k * ld + c) * item, static_cast<size_t>(item));
  mx_encode_scalar(column, dtype, n, e, r, out, scale);
  for (int64_t k = 0; k < n; ++k) {
    uint8_t* byte = codes + k * code_row + code_bytes(e, c + 1) - 1;
    if (e != Element::kE2m1) {
      *byte = out[k];
    } else {
      const int shift = static_cast<int>(c & 1) * 4;
      const auto code = static_cast<uint8_t>((out[k / 2] >> ((k & 1) * 4)) & 0xF);
      *byte = static_cast<uint8_t>((*byte & ~(0xF << shift)) | (code << shift));
    }
  }
  if (run) run->append(mx_run_stats(column, dtype, n, e, r, out, scale));
}

const MxKernels& kernels_for(SimdLevel level) {
  const SimdLevel usable = std::min(level, simd_level());
  if (usable >= SimdLevel::kAvx512) return kAvx512Kernels;
  if (usable >= SimdLevel::kAvx2) return kAvx2Kernels;
  return kScalarKernels;
}

}  // namespace detail

namespace {

using namespace scalar;
constexpr const char* kWhere = "block-format cast";
// Elements per work item: a multiple of both block sizes, long enough to amortise a call.
constexpr int64_t kSegment = 8192;
// The MX row casts' (mx_quantize's) work item: a row body builds its constants and prepares its
// first group once a call, which segments of 64 Ki elements amortise better (also a multiple of
// the row bodies' groups of 8 blocks).
constexpr int64_t kMxRowSegment = 65536;
// Below this many elements one thread does the whole cast.
constexpr int64_t kParallelFrom = 1 << 16;

void check_shape(DType dtype, int64_t rows, int64_t cols, const void* a, const void* b,
                 const void* c) {
  MANTISSA_CHECK(dtype == kFloat32 || dtype == kBFloat16, kWhere,
                 "source dtype {} is not float32 or bfloat16", dtype.name());
  MANTISSA_CHECK(rows >= 0 && cols >= 0, kWhere, "shape [{}, {}] has a negative size", rows, cols);
  MANTISSA_CHECK(rows * cols == 0 || (a && b && c), kWhere, "null buffer for a [{}, {}] cast", rows,
                 cols);
}

const void* at(const void* p, DType dtype, int64_t i) {
  return static_cast<const char*>(p) + i * static_cast<int64_t>(dtype.itemsize());
}

int64_t blocks_of(int64_t n, int64_t block) { return (n + block - 1) / block; }

// Runs fn(row, begin, len) over every segment (`segment` elements) of every row, on threads when
// the cast is long. With `stats`, fn returns the segment's MxStatsRun and the runs are appended
// in row-major order.
template <typename Fn>
void for_each_segment(int64_t rows, int64_t cols, Fn&& fn, MxCastStats* stats = nullptr,
                      int64_t segment = kSegment) {
  const int64_t per_row = blocks_of(cols, segment);
  const int64_t items = rows * per_row;
  std::vector<MxStatsRun> runs(stats ? static_cast<size_t>(items) : 0);
#pragma omp parallel for schedule(static) if (items > 1 && rows * cols >= kParallelFrom)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t r = item / per_row, begin = (item % per_row) * segment;
    if constexpr (std::is_void_v<decltype(fn(r, begin, int64_t{0}))>) {
      fn(r, begin, std::min(segment, cols - begin));
    } else {
      const MxStatsRun run = fn(r, begin, std::min(segment, cols - begin));
      if (stats) runs[item] = run;
    }
  }
  if (!stats) return;
  MxStatsRun all;
  for (const MxStatsRun& run : runs) all.append(run);
  *stats = all.finish();
}

// One segment encoded, and with `stats` counted (mx_run_stats), by the level's kernels; with
// `stream`, by encode_streamed where the level has it.
MxStatsRun encode_segment(const detail::MxKernels& k, const void* x, DType dtype, int64_t n,
                          Element element, E8m0Rounding rounding, uint8_t* codes, uint8_t* scales,
                          bool stats, bool stream = false) {
  if (stream && k.encode_streamed)
    return k.encode_streamed(x, dtype, n, element, rounding, codes, scales, stats);
  if (stats && k.encode_stats) return k.encode_stats(x, dtype, n, element, rounding, codes, scales);
  k.encode(x, dtype, n, element, rounding, codes, scales);
  return stats ? mx_run_stats(x, dtype, n, element, rounding, codes, scales) : MxStatsRun{};
}

}  // namespace

void mx_quantize(const void* src, DType src_dtype, int64_t rows, int64_t cols, Element element,
                 E8m0Rounding rounding, uint8_t* codes, uint8_t* scales, SimdLevel level,
                 MxCastStats* stats) {
  check_shape(src_dtype, rows, cols, src, codes, scales);
  const detail::MxKernels& k = detail::kernels_for(level);
  // Rows of whole blocks lie end to end in src, codes and scales alike: they are cast as one
  // row, in segments that may span rows (the same blocks, in the same order, without a call and
  // a partial group of eight blocks per short row).
  const bool whole_blocks = cols % kMxBlock == 0;
  const int64_t seg_rows = whole_blocks ? 1 : rows, seg_cols = whole_blocks ? rows * cols : cols;
  const int64_t code_stride = code_bytes(element, seg_cols);
  const int64_t scale_stride = blocks_of(seg_cols, kMxBlock);
  const bool stream = seg_rows * code_stride >= kStreamCodesFrom;  // MxKernels::encode_streamed
  for_each_segment(
      seg_rows, seg_cols,
      [&](int64_t r, int64_t begin, int64_t len) {
        const void* x = at(src, src_dtype, r * seg_cols + begin);
        uint8_t* c = codes + r * code_stride + code_bytes(element, begin);
        uint8_t* s = scales + r * scale_stride + begin / kMxBlock;
        return encode_segment(k, x, src_dtype, len, element, rounding, c, s, stats != nullptr,
                              stream);
      },
      stats, kMxRowSegment);
}

void mx_quantize_columns(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                         Element element, E8m0Rounding rounding, uint8_t* codes, uint8_t* scales,
                         SimdLevel level, MxCastStats* stats) {
  check_shape(src_dtype, rows, cols, src, codes, scales);
  if (rows * cols == 0) {
    if (stats) *stats = MxStatsRun{}.finish();
    return;
  }
  const detail::MxKernels& k = detail::kernels_for(level);
  const int64_t block_rows = blocks_of(rows, kMxBlock);
  const int64_t code_row = code_bytes(element, cols);
  // Bands of whole block rows, one a thread; each column's blocks of a band counted in that
  // band's runs, which are appended column by column, band after band (src^T's block order).
  const int64_t bands = rows * cols >= kParallelFrom
                            ? std::min<int64_t>(omp_get_max_threads(), block_rows)
                            : int64_t{1};
  std::vector<MxStatsRun> band_runs(stats ? static_cast<size_t>(bands * cols) : 0);
#pragma omp parallel for schedule(static, 1) if (bands > 1)
  for (int64_t b = 0; b < bands; ++b) {
    const int64_t b0 = block_rows * b / bands, b1 = block_rows * (b + 1) / bands;
    if (b1 == b0) continue;
    const int64_t r0 = b0 * kMxBlock, r1 = std::min(rows, b1 * kMxBlock);
    k.encode_column_band(at(src, src_dtype, r0 * cols), src_dtype, r1 - r0, cols, element, rounding,
                         codes + r0 * code_row, scales + b0 * cols,
                         stats ? band_runs.data() + b * cols : nullptr);
  }
  if (!stats) return;
  MxStatsRun all;
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t b = 0; b < bands; ++b) all.append(band_runs[b * cols + c]);
  *stats = all.finish();
}

void mx_dequantize(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols,
                   Element element, float* out, SimdLevel level) {
  check_shape(kFloat32, rows, cols, codes, scales, out);
  const detail::MxKernels& k = detail::kernels_for(level);
  const int64_t code_stride = code_bytes(element, cols), scale_stride = blocks_of(cols, kMxBlock);
  for_each_segment(rows, cols, [&](int64_t r, int64_t begin, int64_t len) {
    k.decode(codes + r * code_stride + code_bytes(element, begin),
             scales + r * scale_stride + begin / kMxBlock, len, element, out + r * cols + begin);
  });
}

float nvfp4_tensor_scale(const void* src, DType src_dtype, int64_t n, SimdLevel level) {
  check_shape(src_dtype, 1, n, src, src, src);
  const detail::MxKernels& k = detail::kernels_for(level);
  const int64_t items = blocks_of(n, kSegment);
  std::vector<float> part(static_cast<size_t>(items), 0.0f);
#pragma omp parallel for schedule(static) if (n >= kParallelFrom)
  for (int64_t i = 0; i < items; ++i)
    part[i] =
        k.amax(at(src, src_dtype, i * kSegment), src_dtype, std::min(kSegment, n - i * kSegment));
  float amax = 0.0f;
  for (float a : part) {
    if (a != a) return float_of(kTensorAmaxNan) / kNvfp4TensorScaleDivisor;  // torchao's NaN
    amax = a > amax ? a : amax;
  }
  return nvfp4_tensor_scale_of_amax(amax);
}

void nvfp4_quantize(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                    const Nvfp4Encoding& encoding, uint8_t* codes, uint8_t* scales, SimdLevel level,
                    MxCastStats* stats) {
  check_shape(src_dtype, rows, cols, src, codes, scales);
  const detail::MxKernels& k = detail::kernels_for(level);
  const int64_t code_stride = code_bytes(Element::kE2m1, cols);
  const int64_t blocks = blocks_of(cols, kNvfp4Block);
  // The 16x16 tiles' amax, one per (tile row, block column).
  std::vector<float> own_tile_amax;
  const float* tile_amax = encoding.tile_amax;
  // The 1x16 blocks' own amax, one per (row, block column), where the caller took them.
  const float* block_amax = encoding.tiles_16x16 ? nullptr : encoding.block_amax;
  bool tile_records = encoding.tiles_16x16 ? encoding.tile_amax_exact : block_amax != nullptr;
  if (encoding.tiles_16x16 && !tile_amax) {
    own_tile_amax.resize(static_cast<size_t>(blocks_of(rows, kNvfp4Block) * blocks));
    nvfp4_tile_amax(src, src_dtype, rows, cols, own_tile_amax.data(), level);
    tile_amax = own_tile_amax.data();
    tile_records = true;
  }
  const bool stochastic = encoding.rounding == Fp4Rounding::kStochastic;
  const float ts = encoding.tensor_scale;
  const SimdLevel usable = std::min(level, simd_level());
  const bool bf16 = src_dtype == kBFloat16;
  if (encoding.tiles_16x16 && !stochastic && usable >= SimdLevel::kAvx2) {
    // A tile row's 16 rows take the same tile amax: the bfloat16 body (both levels) or the
    // level's float32 one casts them in one call a column segment, each group's scales made once
    // (nvfp4_cast_levels.h).
    for_each_segment(
        blocks_of(rows, kNvfp4Block), cols,
        [&](int64_t t, int64_t begin, int64_t len) {
          const int64_t r0 = t * kNvfp4Block, n_rows = std::min(kNvfp4Block, rows - r0);
          const void* x = at(src, src_dtype, r0 * cols + begin);
          const float* amax = tile_amax + t * blocks + begin / kNvfp4Block;
          uint8_t* c = codes + r0 * code_stride + begin / 2;
          uint8_t* s = scales + r0 * blocks + begin / kNvfp4Block;
          if (bf16)
            return detail::avx2::nvfp4_encode_bf16_tile_rows(
                static_cast<const uint16_t*>(x), n_rows, len, cols, ts, amax, stats != nullptr,
                tile_records, usable >= SimdLevel::kAvx512, c, code_stride, s, blocks);
          const auto f32_tile_rows = usable >= SimdLevel::kAvx512
                                         ? detail::avx512::nvfp4_encode_f32_tile_rows
                                         : detail::avx2::nvfp4_encode_f32_tile_rows;
          return f32_tile_rows(static_cast<const float*>(x), n_rows, len, cols, ts, amax,
                               stats != nullptr, tile_records, c, code_stride, s, blocks);
        },
        stats);
    if (stats) stats->scale = 1.0f / ts;
    return;
  }
  for_each_segment(
      rows, cols,
      [&](int64_t r, int64_t begin, int64_t len) {
        const float* amax =
            encoding.tiles_16x16
                ? tile_amax + (r / kNvfp4Block) * blocks + begin / kNvfp4Block
                : (block_amax ? block_amax + r * blocks + begin / kNvfp4Block : nullptr);
        const void* x = at(src, src_dtype, r * cols + begin);
        uint8_t* c = codes + r * code_stride + begin / 2;
        uint8_t* s = scales + r * blocks + begin / kNvfp4Block;
        if (stats && k.nvfp4_encode_stats)
          return k.nvfp4_encode_stats(x, src_dtype, len, ts, amax, tile_records, stochastic,
                                      encoding.seed, encoding.offset, r, begin, c, s);
        if (stochastic) {
          k.nvfp4_encode_sr(x, src_dtype, len, ts, amax, encoding.seed, encoding.offset, r, begin,
                            c, s);
        } else {
          k.nvfp4_encode(x, src_dtype, len, ts, amax, c, s);
        }
        return stats ? nvfp4_run_stats(x, src_dtype, len, ts, c, s) : MxStatsRun{};
      },
      stats);
  if (stats) stats->scale = 1.0f / ts;
}

void nvfp4_dequantize(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols,
                      float tensor_scale, float* out, SimdLevel level) {
  check_shape(kFloat32, rows, cols, codes, scales, out);
  const detail::MxKernels& k = detail::kernels_for(level);
  const int64_t code_stride = code_bytes(Element::kE2m1, cols);
  const int64_t blocks = blocks_of(cols, kNvfp4Block);
  for_each_segment(rows, cols, [&](int64_t r, int64_t begin, int64_t len) {
    k.nvfp4_decode(codes + r * code_stride + begin / 2, scales + r * blocks + begin / kNvfp4Block,
                   len, tensor_scale, out + r * cols + begin);
  });
}

}  // namespace mantissa::kernels::mx
