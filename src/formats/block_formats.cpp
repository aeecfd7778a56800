// The block formats' quantize/dequantize API (mantissa/formats/block_formats.h): argument
// checks, buffer sizes and the call into the cast kernels of kernels/cpu/mx, which pick their
// SIMD level at run time.
#include "mantissa/formats/block_formats.h"

#include "kernels/cpu/mx/mx_cast.h"
#include "mantissa/core/error.h"
#include "mantissa/formats/format_table.h"

namespace mantissa::formats {
namespace {

namespace km = kernels::mx;
constexpr const char* kWhere = "block formats";

km::Element element_of(FormatId f) {
  switch (f) {
    case FormatId::kMxfp8E4m3:
      return km::Element::kE4m3;
    case FormatId::kMxfp8E5m2:
      return km::Element::kE5m2;
    default:
      return km::Element::kE2m1;
  }
}

km::E8m0Rounding rounding_of(E8m0Rounding r) {
  return r == E8m0Rounding::kFloor ? km::E8m0Rounding::kFloor : km::E8m0Rounding::kRceil;
}

void check_layout(const BlockLayout& l) {
  MANTISSA_CHECK(is_block_format(l.format), kWhere, "format {} is not a block format ({})",
                 format_name(l.format), "mxfp8-e4m3, mxfp8-e5m2, mxfp4, nvfp4");
  MANTISSA_CHECK(l.rows >= 0 && l.cols >= 0, kWhere, "{} shape [{}, {}] has a negative size",
                 format_name(l.format), l.rows, l.cols);
}

template <typename T>
void check_sizes(const BlockLayout& l, std::span<T> values, size_t codes, size_t scales) {
  check_layout(l);
  const auto n = static_cast<size_t>(l.rows * l.cols);
  MANTISSA_CHECK(values.size() == n, kWhere, "{} [{}, {}] needs {} values, got {}",
                 format_name(l.format), l.rows, l.cols, n, values.size());
  MANTISSA_CHECK(codes == static_cast<size_t>(l.code_bytes()), kWhere,
                 "{} [{}, {}] has {} code bytes, got {}", format_name(l.format), l.rows, l.cols,
                 l.code_bytes(), codes);
  MANTISSA_CHECK(scales == static_cast<size_t>(l.scale_bytes()), kWhere,
                 "{} [{}, {}] has {} scale bytes, got {}", format_name(l.format), l.rows, l.cols,
                 l.scale_bytes(), scales);
}

float quantize_raw(const BlockLayout& l, const void* x, DType dtype, uint8_t* codes,
                   uint8_t* scales, const MxOptions& mx, const Nvfp4Options& nv) {
  if (l.format != FormatId::kNvfp4) {
    km::mx_quantize(x, dtype, l.rows, l.cols, element_of(l.format), rounding_of(mx.rounding), codes,
                    scales);
    return 1.0f;
  }
  km::Nvfp4Encoding e;
  e.tensor_scale =
      nv.tensor_scale ? *nv.tensor_scale : km::nvfp4_tensor_scale(x, dtype, l.rows * l.cols);
  e.tiles_16x16 = nv.tiles_16x16;
  e.rounding = nv.stochastic ? km::Fp4Rounding::kStochastic : km::Fp4Rounding::kNearest;
  e.seed = nv.seed;
  e.offset = nv.offset;
  km::nvfp4_quantize(x, dtype, l.rows, l.cols, e, codes, scales);
  return e.tensor_scale;
}

template <typename T>
BlockQuantized quantize(FormatId f, std::span<const T> x, int64_t rows, int64_t cols,
                        const MxOptions& mx, const Nvfp4Options& nv) {
  BlockQuantized q;
  q.layout = {.format = f, .rows = rows, .cols = cols};
  check_layout(q.layout);
  q.codes.assign(static_cast<size_t>(q.layout.code_bytes()), 0);
  q.scales.assign(static_cast<size_t>(q.layout.scale_bytes()), 0);
  check_sizes(q.layout, x, q.codes.size(), q.scales.size());
  q.tensor_scale = quantize_raw(q.layout, x.data(), std::is_same_v<T, float> ? kFloat32 : kBFloat16,
                                q.codes.data(), q.scales.data(), mx, nv);
  return q;
}

FormatId checked_fp8(FormatId element) {
  MANTISSA_CHECK(element == FormatId::kMxfp8E4m3 || element == FormatId::kMxfp8E5m2, kWhere,
                 "quantize_mxfp8 takes mxfp8-e4m3 or mxfp8-e5m2, got {}", format_name(element));
  return element;
}

}  // namespace

int64_t BlockLayout::block() const {
  return format == FormatId::kNvfp4 ? km::kNvfp4Block : km::kMxBlock;
}
int64_t BlockLayout::row_code_bytes() const { return km::code_bytes(element_of(format), cols); }
int64_t BlockLayout::row_scales() const { return (cols + block() - 1) / block(); }

bool is_block_format(FormatId f) {
  return f == FormatId::kMxfp8E4m3 || f == FormatId::kMxfp8E5m2 || f == FormatId::kMxfp4 ||
         f == FormatId::kNvfp4;
}

BlockQuantized quantize_mxfp8(std::span<const float> x, int64_t rows, int64_t cols,
                              FormatId element, const MxOptions& o) {
  return quantize(checked_fp8(element), x, rows, cols, o, {});
}
BlockQuantized quantize_mxfp8(std::span<const BFloat16> x, int64_t rows, int64_t cols,
                              FormatId element, const MxOptions& o) {
  return quantize(checked_fp8(element), x, rows, cols, o, {});
}
BlockQuantized quantize_mxfp4(std::span<const float> x, int64_t rows, int64_t cols,
                              const MxOptions& o) {
  return quantize(FormatId::kMxfp4, x, rows, cols, o, {});
}
BlockQuantized quantize_mxfp4(std::span<const BFloat16> x, int64_t rows, int64_t cols,
                              const MxOptions& o) {
  return quantize(FormatId::kMxfp4, x, rows, cols, o, {});
}
BlockQuantized quantize_nvfp4(std::span<const float> x, int64_t rows, int64_t cols,
                              const Nvfp4Options& o) {
  return quantize(FormatId::kNvfp4, x, rows, cols, {}, o);
}
BlockQuantized quantize_nvfp4(std::span<const BFloat16> x, int64_t rows, int64_t cols,
                              const Nvfp4Options& o) {
  return quantize(FormatId::kNvfp4, x, rows, cols, {}, o);
}

float quantize_into(const BlockLayout& layout, std::span<const float> x, std::span<uint8_t> codes,
                    std::span<uint8_t> scales, const MxOptions& mx, const Nvfp4Options& nvfp4) {
  check_sizes(layout, x, codes.size(), scales.size());
  return quantize_raw(layout, x.data(), kFloat32, codes.data(), scales.data(), mx, nvfp4);
}
float quantize_into(const BlockLayout& layout, std::span<const BFloat16> x,
                    std::span<uint8_t> codes, std::span<uint8_t> scales, const MxOptions& mx,
                    const Nvfp4Options& nvfp4) {
  check_sizes(layout, x, codes.size(), scales.size());
  return quantize_raw(layout, x.data(), kBFloat16, codes.data(), scales.data(), mx, nvfp4);
}

void dequantize_into(const BlockLayout& l, std::span<const uint8_t> codes,
                     std::span<const uint8_t> scales, float tensor_scale, std::span<float> out) {
  check_sizes(l, out, codes.size(), scales.size());
  if (l.format == FormatId::kNvfp4)
    km::nvfp4_dequantize(codes.data(), scales.data(), l.rows, l.cols, tensor_scale, out.data());
  else
    km::mx_dequantize(codes.data(), scales.data(), l.rows, l.cols, element_of(l.format),
                      out.data());
}

std::vector<float> dequantize(const BlockQuantized& q) {
  std::vector<float> out(static_cast<size_t>(q.layout.rows * q.layout.cols));
  dequantize_into(q.layout, q.codes, q.scales, q.tensor_scale, out);
  return out;
}

}  // namespace mantissa::formats
