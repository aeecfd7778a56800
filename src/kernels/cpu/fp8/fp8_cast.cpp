// Scalar FP8 cast and dequantisation, and the dispatcher that splits long buffers over
// threads (amax is a max and the counts are sums, so the result does not depend on the split).
#include "kernels/cpu/fp8/fp8_cast.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/common/aligned_vector.h"
#include "kernels/cpu/common/column_bands.h"
#include "kernels/cpu/common/stream_codes.h"
#include "kernels/cpu/fp8/rowwise_cast.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/error.h"
#include "mantissa/core/float8.h"
#include "mantissa/core/half.h"

namespace mantissa::kernels::fp8 {
namespace {

constexpr int64_t kChunk = 1 << 16;

void check_formats(const char* what, DType hp, DType fp8, bool is_source) {
  MANTISSA_CHECK(fp8.is_float8(), "fp8 cast", "{}: {} is not an FP8 dtype", what, fp8.name());
  const bool ok = hp == kFloat32 || hp == kBFloat16 || (is_source && hp == kFloat16);
  MANTISSA_CHECK(ok, "fp8 cast", "{}: unsupported {} dtype {} (float32, bfloat16{})", what,
                 is_source ? "source" : "destination", hp.name(), is_source ? ", float16" : "");
}

float load(const void* src, DType dtype, int64_t i) {
  if (dtype == kFloat32) return static_cast<const float*>(src)[i];
  const uint16_t b = static_cast<const uint16_t*>(src)[i];
  return dtype == kBFloat16 ? bf16_bits_to_float(b) : half_bits_to_float(b);
}

const void* offset(const void* p, DType dtype, int64_t i) {
  return static_cast<const char*>(p) + i * static_cast<int64_t>(dtype.itemsize());
}
void* offset(void* p, DType dtype, int64_t i) {
  return static_cast<char*>(p) + i * static_cast<int64_t>(dtype.itemsize());
}

bool usable(SimdLevel wanted, SimdLevel level) { return level >= wanted && simd_level() >= wanted; }

using CastFn = CastStats (*)(const void*, DType, uint8_t*, int64_t, float, DType);
using DequantizeFn = void (*)(const uint8_t*, DType, void*, DType, int64_t, float);

CastFn cast_body(SimdLevel level) {
  if (usable(SimdLevel::kAvx512, level)) return detail::scaled_cast_avx512;
  if (usable(SimdLevel::kAvx2, level)) return detail::scaled_cast_avx2;
  return detail::scaled_cast_scalar;
}

DequantizeFn dequantize_body(SimdLevel level) {
  if (usable(SimdLevel::kAvx512, level)) return detail::dequantize_avx512;
  if (usable(SimdLevel::kAvx2, level)) return detail::dequantize_avx2;
  return detail::dequantize_scalar;
}

}  // namespace

namespace detail {

const float* decode_table(DType fp8) {
  static const auto tables = [] {
    std::array<std::array<float, 256>, 2> t{};
    for (int c = 0; c < 256; ++c) {
      t[0][c] = fp8_e4m3_bits_to_float(static_cast<uint8_t>(c));
      t[1][c] = fp8_e5m2_bits_to_float(static_cast<uint8_t>(c));
    }
    return t;
  }();
  return fp8 == kFloat8_e4m3fn ? tables[0].data() : tables[1].data();
}

namespace {
// The scalar cast; element i scaled by scales[i] when scales is set, else by `scale`.
CastStats cast_scalar(const void* src, DType src_dtype, uint8_t* dst, int64_t n, float scale,
                      const float* scales, DType fp8) {
  const bool e4m3 = fp8 == kFloat8_e4m3fn;
  const float max = e4m3 ? Float8E4M3::kMax : Float8E5M2::kMax;
  CastStats st;
  for (int64_t i = 0; i < n; ++i) {
    const float x = load(src, src_dtype, i);
    const float ax = std::fabs(x);
    // Not std::fmax: glibc's fmax returns NaN for a signalling NaN operand (IEEE 754-2008
    // maxNum); every NaN must be ignored, as max_ps in the SIMD path does.
    st.amax = ax > st.amax ? ax : st.amax;
    const float y = x * (scales ? scales[i] : scale);
    const uint8_t code = e4m3 ? float_to_fp8_e4m3_bits(y) : float_to_fp8_e5m2_bits(y);
    dst[i] = code;
    st.saturated += std::fabs(y) > max ? 1 : 0;
    st.flushed += (x != 0.0f && (code & 0x7f) == 0) ? 1 : 0;
  }
  return st;
}
}  // namespace

CastStats scaled_cast_scalar(const void* src, DType src_dtype, uint8_t* dst, int64_t n, float scale,
                             DType fp8) {
  return cast_scalar(src, src_dtype, dst, n, scale, nullptr, fp8);
}

CastStats scaled_cast_each_scalar(const void* src, DType src_dtype, uint8_t* dst, int64_t n,
                                  const float* scales, DType fp8) {
  return cast_scalar(src, src_dtype, dst, n, 0.0f, scales, fp8);
}

void dequantize_scalar(const uint8_t* src, DType fp8, void* dst, DType dst_dtype, int64_t n,
                       float scale_inv) {
  const float* table = decode_table(fp8);
  if (dst_dtype == kFloat32) {
    float* out = static_cast<float*>(dst);
    for (int64_t i = 0; i < n; ++i) out[i] = table[src[i]] * scale_inv;
  } else {
    uint16_t* out = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16_bits(table[src[i]] * scale_inv);
  }
}

uint32_t abs_mask_of(DType src_dtype) { return src_dtype == kFloat32 ? 0x7FFFFFFFu : 0x7FFFu; }

uint32_t inf_bits_of(DType src_dtype) {
  return src_dtype == kFloat32 ? 0x7F800000u : src_dtype == kBFloat16 ? 0x7F80u : 0x7C00u;
}

Amax amax_of_bits(uint32_t best, uint32_t raw, DType src_dtype) {
  Amax out;
  out.nan = raw > inf_bits_of(src_dtype);
  if (src_dtype == kFloat32) {
    out.amax = std::bit_cast<float>(best);
  } else {
    const auto b = static_cast<uint16_t>(best);
    out.amax = src_dtype == kBFloat16 ? bf16_bits_to_float(b) : half_bits_to_float(b);
  }
  return out;
}

namespace {
// The bits of element i of a float32/bfloat16/float16 buffer.
uint32_t bits_at(const void* src, DType src_dtype, int64_t i) {
  return src_dtype == kFloat32 ? static_cast<const uint32_t*>(src)[i]
                               : static_cast<const uint16_t*>(src)[i];
}
}  // namespace

Amax amax_scalar(const void* src, DType src_dtype, int64_t n) {
  const uint32_t abs = abs_mask_of(src_dtype), inf = inf_bits_of(src_dtype);
  uint32_t best = 0, raw = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = bits_at(src, src_dtype, i) & abs;
    raw = a > raw ? a : raw;
    best = a <= inf && a > best ? a : best;
  }
  return amax_of_bits(best, raw, src_dtype);
}

void column_amax_bits_scalar(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                             uint32_t* best, uint32_t* raw) {
  const uint32_t abs = abs_mask_of(src_dtype), inf = inf_bits_of(src_dtype);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint32_t a = bits_at(src, src_dtype, r * cols + c) & abs;
      raw[c] = a > raw[c] ? a : raw[c];
      best[c] = a <= inf && a > best[c] ? a : best[c];
    }
}

Bf16TableCast bf16_table_cast(float scale, DType fp8, const Amax& known) {
  Bf16TableCast t;
  const bool e4m3 = fp8 == kFloat8_e4m3fn;
  const int mant = e4m3 ? 3 : 2;
  const float max = e4m3 ? Float8E4M3::kMax : Float8E5M2::kMax;
  const float min_normal = e4m3 ? 0x1p-6f : 0x1p-14f;
  const auto code_of = [e4m3](float y) {
    return e4m3 ? float_to_fp8_e4m3_bits(y) : float_to_fp8_e5m2_bits(y);
  };
  const uint32_t sb = std::bit_cast<uint32_t>(scale);
  const int field = static_cast<int>(sb >> 23);  // 256 and above: negative
  // The table's products x0 * scale lie in [1, 4) with x0 = (1 + m/128) * 2^-k for scale's
  // exponent k, a normal bfloat16 for k in [-126, 126].
  if (known.nan || !std::isfinite(known.amax) || field < 1 || field > 253 ||
      std::fabs(known.amax * scale) > max)
    return t;
  // normal_from: the smallest |h| whose product reaches min_normal (products grow with |h|).
  uint32_t lo = 1, hi = 0x7F80;  // hi: inf, whose product exceeds any min_normal
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (bf16_bits_to_float(static_cast<uint16_t>(mid)) * scale >= min_normal)
      hi = mid;
    else
      lo = mid + 1;
  }
  // A lane below it must be recognisable by its high byte alone when it is 0 (zero_below >= 1).
  if (lo < 0x100 || lo >= 0x7F80) return t;
  const int e0 = 127 - (field - 127);  // x0's biased exponent
  const int shift = 7 - mant;
  std::array<int, 128> folded{};
  for (int m = 0; m < 128; ++m) {
    const float x0 = bf16_bits_to_float(static_cast<uint16_t>((e0 << 7) | m));
    const int code = code_of(x0 * scale);
    folded[static_cast<size_t>(m)] =
        (code - (e0 << mant) - ((m >> shift) & ((1 << mant) - 1))) & 0xFF;
  }
  for (int g = 0; g < 16; ++g) {
    const int base = folded[static_cast<size_t>(8 * g)];
    int step_after = 7;
    for (int j = 1; j < 8; ++j) {
      const int d = (folded[static_cast<size_t>(8 * g + j)] - base) & 0xFF;
      if (d > 1 || (d == 0 && step_after < 7)) return t;  // not a single step of one
      if (d == 1 && step_after == 7) step_after = j - 1;
    }
    t.base[g] = static_cast<uint8_t>(base);
    t.step_after[g] = static_cast<int8_t>(step_after);
  }
  t.normal_from = static_cast<uint16_t>(lo);
  t.zero_below = static_cast<uint8_t>(lo >> 8);
  t.usable = true;
  return t;
}

CastStats finish_simd_cast(const float* lane_amax, int lanes, int64_t saturated, int64_t flushed,
                           const void* src, DType src_dtype, uint8_t* dst, int64_t i, int64_t n,
                           float scale, DType fp8, const float* scales) {
  CastStats st;
  for (int l = 0; l < lanes; ++l) st.amax = lane_amax[l] > st.amax ? lane_amax[l] : st.amax;
  if (i < n) {
    const CastStats tail = cast_scalar(offset(src, src_dtype, i), src_dtype, dst + i, n - i, scale,
                                       scales ? scales + i : nullptr, fp8);
    st.amax = tail.amax > st.amax ? tail.amax : st.amax;
    st.saturated = tail.saturated;
    st.flushed = tail.flushed;
  }
  st.saturated += saturated;
  st.flushed += flushed;
  return st;
}

}  // namespace detail

namespace {

// The threaded cast; with `widened`, each chunk's codes are widened right after they are made.
CastStats cast_chunks(const void* src, DType src_dtype, uint8_t* dst, uint16_t* widened, int64_t n,
                      float scale, DType fp8, SimdLevel level) {
  check_formats("scaled_cast", src_dtype, fp8, true);
  MANTISSA_CHECK(n >= 0 && (n == 0 || (src && dst)), "fp8 cast",
                 "scaled_cast needs n >= 0 and non-null buffers");
  const CastFn body = cast_body(level);
  const DequantizeFn widen = dequantize_body(level);
  const bool fused = widened && usable(SimdLevel::kAvx512, level);
  auto run = [&](int64_t begin, int64_t len) {
    if (fused) {
      return detail::scaled_cast_widened_avx512(offset(src, src_dtype, begin), src_dtype,
                                                dst + begin, widened + begin, len, scale, fp8);
    }
    const CastStats s =
        body(offset(src, src_dtype, begin), src_dtype, dst + begin, len, scale, fp8);
    if (widened) widen(dst + begin, fp8, widened + begin, kBFloat16, len, 1.0f);
    return s;
  };
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  if (chunks <= 1) return run(0, n);
  CastStats total;
  float amax = 0.0f;
  int64_t saturated = 0, flushed = 0;
#pragma omp parallel for schedule(static) reduction(max : amax) reduction(+ : saturated, flushed)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk;
    const CastStats s = run(begin, std::min(kChunk, n - begin));
    amax = std::max(amax, s.amax);
    saturated += s.saturated;
    flushed += s.flushed;
  }
  total.amax = amax;
  total.saturated = saturated;
  total.flushed = flushed;
  return total;
}

}  // namespace

CastStats scaled_cast(const void* src, DType src_dtype, uint8_t* dst, int64_t n, float scale,
                      DType fp8, SimdLevel level) {
  return cast_chunks(src, src_dtype, dst, nullptr, n, scale, fp8, level);
}

CastStats scaled_cast_widened(const void* src, DType src_dtype, uint8_t* dst, uint16_t* widened,
                              int64_t n, float scale, DType fp8, SimdLevel level) {
  MANTISSA_CHECK(n == 0 || widened, "fp8 cast", "scaled_cast_widened needs a widened buffer");
  return cast_chunks(src, src_dtype, dst, widened, n, scale, fp8, level);
}

CastStats scaled_cast_columns(const void* src, DType src_dtype, uint8_t* dst, int64_t rows,
                              int64_t cols, const float* col_scale, DType fp8, SimdLevel level) {
  check_formats("scaled_cast_columns", src_dtype, fp8, true);
  MANTISSA_CHECK(rows >= 0 && cols >= 0 && (rows * cols == 0 || (src && dst && col_scale)),
                 "fp8 cast", "scaled_cast_columns needs sizes >= 0 and non-null buffers");
  using EachFn = CastStats (*)(const void*, DType, uint8_t*, int64_t, const float*, DType);
  const EachFn body = usable(SimdLevel::kAvx512, level) ? detail::scaled_cast_each_avx512
                      : usable(SimdLevel::kAvx2, level) ? detail::scaled_cast_each_avx2
                                                        : detail::scaled_cast_each_scalar;
  float amax = 0.0f;
  int64_t saturated = 0, flushed = 0;
#pragma omp parallel for schedule(static) reduction(max : amax) reduction(+ : saturated, flushed) if (rows * cols > kChunk)
  for (int64_t r = 0; r < rows; ++r) {
    const CastStats s =
        body(offset(src, src_dtype, r * cols), src_dtype, dst + r * cols, cols, col_scale, fp8);
    amax = std::max(amax, s.amax);
    saturated += s.saturated;
    flushed += s.flushed;
  }
  CastStats total;
  total.amax = amax;
  total.saturated = saturated;
  total.flushed = flushed;
  return total;
}

namespace {

// scaled_cast_after_amax, and with `widened` the codes' bfloat16 copies of scaled_cast_widened:
// each chunk is widened right after its table cast, while its codes are in cache.
CastStats cast_after_amax(const void* src, DType src_dtype, uint8_t* dst, uint16_t* widened,
                          int64_t n, float scale, DType fp8, const Amax& known, SimdLevel level) {
  const bool avx2 = usable(SimdLevel::kAvx2, level);
  const detail::Bf16TableCast table = src_dtype == kBFloat16 && avx2
                                          ? detail::bf16_table_cast(scale, fp8, known)
                                          : detail::Bf16TableCast{};
  // float32 to E4M3 under a scale >= 1: rowwise_cast.h's cast_f32_scaled (which may decline;
  // each chunk then takes scaled_cast's body, the same bits).
  const bool f32_scaled = src_dtype == kFloat32 && fp8 == kFloat8_e4m3fn && avx2 && !known.nan &&
                          scale >= 1.0f && std::isfinite(known.amax);
  if (!table.usable && !f32_scaled) {
    CastStats st = cast_chunks(src, src_dtype, dst, widened, n, scale, fp8, level);
    st.amax = known.amax;
    return st;
  }
  // Large casts stream their codes (common/stream_codes.h), except codes widened next.
  const bool stream =
      !widened && n >= kStreamCodesFrom && reinterpret_cast<uintptr_t>(dst) % 32 == 0;
  const DequantizeFn widen = dequantize_body(level);
  const CastFn body = cast_body(level);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  int64_t saturated = 0, flushed = 0;
#pragma omp parallel for schedule(static) reduction(+ : saturated, flushed) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk, len = std::min(kChunk, n - begin);
    CastStats s;
    if (table.usable) {
      s = detail::bf16_table_cast_avx2(static_cast<const uint16_t*>(src) + begin, dst + begin, len,
                                       scale, fp8, table, stream);
    } else if (!cast_f32_scaled(static_cast<const float*>(src) + begin, dst + begin, len, scale,
                                known.amax, &s, stream)) {
      s = body(offset(src, src_dtype, begin), src_dtype, dst + begin, len, scale, fp8);
    }
    if (widened) widen(dst + begin, fp8, widened + begin, kBFloat16, len, 1.0f);
    saturated += s.saturated;
    flushed += s.flushed;
  }
  CastStats total;
  total.amax = known.amax;
  total.saturated = saturated;
  total.flushed = flushed;
  return total;
}

}  // namespace

CastStats scaled_cast_after_amax(const void* src, DType src_dtype, uint8_t* dst, int64_t n,
                                 float scale, DType fp8, const Amax& known, SimdLevel level) {
  check_formats("scaled_cast_after_amax", src_dtype, fp8, true);
  MANTISSA_CHECK(n >= 0 && (n == 0 || (src && dst)), "fp8 cast",
                 "scaled_cast_after_amax needs n >= 0 and non-null buffers");
  return cast_after_amax(src, src_dtype, dst, nullptr, n, scale, fp8, known, level);
}

CastStats scaled_cast_widened_after_amax(const void* src, DType src_dtype, uint8_t* dst,
                                         uint16_t* widened, int64_t n, float scale, DType fp8,
                                         const Amax& known, SimdLevel level) {
  check_formats("scaled_cast_widened_after_amax", src_dtype, fp8, true);
  MANTISSA_CHECK(n >= 0 && (n == 0 || (src && dst && widened)), "fp8 cast",
                 "scaled_cast_widened_after_amax needs n >= 0 and non-null buffers");
  return cast_after_amax(src, src_dtype, dst, widened, n, scale, fp8, known, level);
}

Amax amax(const void* src, DType src_dtype, int64_t n, SimdLevel level) {
  check_formats("amax", src_dtype, kFloat8_e4m3fn, true);
  MANTISSA_CHECK(n >= 0 && (n == 0 || src), "fp8 cast", "amax needs n >= 0 and a non-null buffer");
  using AmaxFn = Amax (*)(const void*, DType, int64_t);
  const AmaxFn body = usable(SimdLevel::kAvx512, level) ? detail::amax_avx512
                      : usable(SimdLevel::kAvx2, level) ? detail::amax_avx2
                                                        : detail::amax_scalar;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  // One chunk (a row of the rowwise casts, called from their threaded loop): no parallel
  // region, which costs a team's set-up and a futex call even when it runs on one thread.
  if (chunks == 1) return body(src, src_dtype, n);
  float best = 0.0f;  // the chunks' amaxes are never NaN
  bool nan = false;
#pragma omp parallel for schedule(static) reduction(max : best) reduction(|| : nan) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk;
    const Amax a = body(offset(src, src_dtype, begin), src_dtype, std::min(kChunk, n - begin));
    best = std::max(best, a.amax);
    nan = nan || a.nan;
  }
  return {best, nan};
}

void column_amax(const void* src, DType src_dtype, int64_t rows, int64_t cols, Amax* out,
                 SimdLevel level) {
  check_formats("column_amax", src_dtype, kFloat8_e4m3fn, true);
  MANTISSA_CHECK(rows >= 0 && cols >= 0 && (cols == 0 || out) && (rows * cols == 0 || src),
                 "fp8 cast", "column_amax needs sizes >= 0 and non-null buffers");
  // The two maxima side by side: best in [0, cols), raw in [cols, 2 cols).
  AlignedVector<uint32_t> bits(static_cast<size_t>(2 * cols), 0u);
  const auto body = usable(SimdLevel::kAvx2, level) ? detail::column_amax_bits_avx2
                                                    : detail::column_amax_bits_scalar;
  const auto* bytes = static_cast<const char*>(src);
  const int64_t row_bytes = cols * static_cast<int64_t>(src_dtype.itemsize());
  column_maxima_in_bands(rows, 2 * cols, rows * cols > kChunk, bits.data(),
                         [&](int64_t r0, int64_t n, uint32_t* m) {
                           body(bytes + r0 * row_bytes, src_dtype, n, cols, m, m + cols);
                         });
  for (int64_t c = 0; c < cols; ++c)
    out[c] = detail::amax_of_bits(bits[static_cast<size_t>(c)], bits[static_cast<size_t>(cols + c)],
                                  src_dtype);
}

void dequantize(const uint8_t* src, DType fp8, void* dst, DType dst_dtype, int64_t n,
                float scale_inv, SimdLevel level) {
  check_formats("dequantize", dst_dtype, fp8, false);
  MANTISSA_CHECK(n >= 0 && (n == 0 || (src && dst)), "fp8 cast",
                 "dequantize needs n >= 0 and non-null buffers");
  const DequantizeFn body = dequantize_body(level);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk, len = std::min(kChunk, n - begin);
    body(src + begin, fp8, offset(dst, dst_dtype, begin), dst_dtype, len, scale_inv);
  }
}

}  // namespace mantissa::kernels::fp8
