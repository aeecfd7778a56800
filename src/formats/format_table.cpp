// The rows of the format table (mantissa/formats/format_table.h). Each row points at the
// functions the bulk paths already run, through adapters to the table's one encode/decode
// signature: core's conversions (bf16, f16), fp8's scaled casts (e4m3, e5m2), the 4-bit and
// LLM.int8 quantizers, the blockwise dynamic map of kernels/cpu/quant, and the block-format
// casts of kernels/cpu/mx (mxfp8-e4m3, mxfp8-e5m2, mxfp4, nvfp4).
#include "mantissa/formats/format_table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cstring>
#include <vector>

#include "core/convert_simd.h"
#include "kernels/cpu/fp8/fp8_block.h"
#include "kernels/cpu/fp8/fp8_cast.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/quant/blockwise_dynamic.h"
#include "kernels/cpu/quant/four_bit.h"
#include "kernels/cpu/quant/int8_epilogue.h"
#include "kernels/cpu/quant/int8_rowwise.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/error.h"
#include "mantissa/core/half.h"

namespace mantissa::formats {
namespace {

namespace cd = convert_detail;
namespace kq = kernels::quant;
namespace kf = kernels::fp8;
namespace km = kernels::mx;

// bf16 and f16: core's scalar conversions and its SIMD row kernels.
template <uint16_t (*ToBits)(float)>
void encode_16_scalar(const float* x, int64_t n, int64_t, void* codes, void*) {
  auto* out = static_cast<uint16_t*>(codes);
  for (int64_t i = 0; i < n; ++i) out[i] = ToBits(x[i]);
}
template <float (*FromBits)(uint16_t)>
void decode_16_scalar(const void* codes, int64_t n, int64_t, const void*, float* out) {
  const auto* in = static_cast<const uint16_t*>(codes);
  for (int64_t i = 0; i < n; ++i) out[i] = FromBits(in[i]);
}
template <void (*Kernel)(const float*, uint16_t*, int64_t)>
void encode_16(const float* x, int64_t n, int64_t, void* codes, void*) {
  Kernel(x, static_cast<uint16_t*>(codes), n);
}
template <void (*Kernel)(const uint16_t*, float*, int64_t)>
void decode_16(const void* codes, int64_t n, int64_t, const void*, float* out) {
  Kernel(static_cast<const uint16_t*>(codes), out, n);
}

uint16_t bf16_bits(float f) { return float_to_bf16_bits(f); }
float bf16_value(uint16_t b) { return bf16_bits_to_float(b); }
uint16_t half_bits(float f) { return float_to_half_bits(f); }
float half_value(uint16_t h) { return half_bits_to_float(h); }

constexpr std::array<FormatKernel, 3> kBf16Kernels = {{
    {SimdLevel::kAvx2, encode_16<cd::f32_to_bf16_avx2>, decode_16<cd::bf16_to_f32_avx2>},
    {SimdLevel::kAvx512, encode_16<cd::f32_to_bf16_avx512>, decode_16<cd::bf16_to_f32_avx512>},
    {SimdLevel::kAvx512Bf16, encode_16<cd::f32_to_bf16_avx512bf16>, nullptr},
}};
constexpr std::array<FormatKernel, 2> kF16Kernels = {{
    {SimdLevel::kAvx2, encode_16<cd::f32_to_f16_avx2>, decode_16<cd::f16_to_f32_avx2>},
    {SimdLevel::kAvx512, encode_16<cd::f32_to_f16_avx512>, decode_16<cd::f16_to_f32_avx512>},
}};

// e4m3 and e5m2: fp8's delayed-scaling casts (x * scale, saturating RNE) and their inverse.
template <kf::CastStats (*Cast)(const void*, DType, uint8_t*, int64_t, float, DType), DType::Id F>
void encode_fp8(const float* x, int64_t n, int64_t, void* codes, void* scales) {
  Cast(x, kFloat32, static_cast<uint8_t*>(codes), n, *static_cast<const float*>(scales), F);
}
template <void (*Dequantize)(const uint8_t*, DType, void*, DType, int64_t, float), DType::Id F>
void decode_fp8(const void* codes, int64_t n, int64_t, const void* scales, float* out) {
  Dequantize(static_cast<const uint8_t*>(codes), F, out, kFloat32, n,
             *static_cast<const float*>(scales));
}
template <DType::Id F>
constexpr std::array<FormatKernel, 2> kFp8Kernels = {{
    {SimdLevel::kAvx2, encode_fp8<kf::detail::scaled_cast_avx2, F>,
     decode_fp8<kf::detail::dequantize_avx2, F>},
    {SimdLevel::kAvx512, encode_fp8<kf::detail::scaled_cast_avx512, F>,
     decode_fp8<kf::detail::dequantize_avx512, F>},
}};

// nf4 and fp4: the 4-bit quantizer's levels (codes packed two per byte, absmax per block).
template <FormatId F>
void encode_four_bit_scalar(const float* x, int64_t n, int64_t block, void* codes,
                            void* scale_bytes) {
  float* scales = static_cast<float*>(scale_bytes);
  kq::quantize_4bit(x, 0, n, n, block, F, static_cast<uint8_t*>(codes), scales, SimdLevel::kScalar);
}
template <FormatId F>
void decode_four_bit_scalar(const void* codes, int64_t n, int64_t block, const void* scale_bytes,
                            float* out) {
  const float* scales = static_cast<const float*>(scale_bytes);
  kq::dequantize_4bit_scalar(static_cast<const uint8_t*>(codes), scales, 0, n, block, F, out);
}
template <FormatId F>
void encode_four_bit_avx2(const float* x, int64_t n, int64_t block, void* codes,
                          void* scale_bytes) {
  float* scales = static_cast<float*>(scale_bytes);
  kq::quantize_4bit_avx2(x, 0, n, n, block, F, static_cast<uint8_t*>(codes), scales);
}
template <FormatId F>
void decode_four_bit_avx2(const void* codes, int64_t n, int64_t block, const void* scale_bytes,
                          float* out) {
  const float* scales = static_cast<const float*>(scale_bytes);
  kq::dequantize_4bit_avx2(static_cast<const uint8_t*>(codes), scales, 0, n, block, F, out);
}
// (Decoding straight to bf16/f16 has an AVX-512 kernel too, dequantize_4bit_16; the table's
// decoders give float32.)
template <FormatId F>
constexpr std::array<FormatKernel, 1> kFourBitKernels = {{
    {SimdLevel::kAvx2, encode_four_bit_avx2<F>, decode_four_bit_avx2<F>},
}};

// int8-rowwise: LLM.int8's row quantizer (no outlier threshold) and its dequantizer.
template <SimdLevel L>
void encode_int8_rows(const float* x, int64_t n, int64_t block, void* codes, void* scale_bytes) {
  float* scales = static_cast<float*>(scale_bytes);
  kq::int8_rowwise_quantize(x, n / block, block, 0.0f, static_cast<int8_t*>(codes), scales, nullptr,
                            L);
}
template <SimdLevel L>
void decode_int8_rows(const void* codes, int64_t n, int64_t block, const void* scale_bytes,
                      float* out) {
  const float* scales = static_cast<const float*>(scale_bytes);
  kq::int8_dequantize_rows(static_cast<const int8_t*>(codes), scales, n / block, block, out, L);
}
constexpr std::array<FormatKernel, 2> kInt8RowKernels = {{
    {SimdLevel::kAvx2, nullptr, decode_int8_rows<SimdLevel::kAvx2>},
    {SimdLevel::kAvx512, encode_int8_rows<SimdLevel::kAvx512>, nullptr},
}};

// blockwise-dynamic-8bit: indices into bitsandbytes' signed dynamic map (the 8-bit optimizers'
// first moment, the double-quantized 4-bit absmax; the second moment uses the unsigned map).
void encode_blockwise(const float* x, int64_t n, int64_t block, void* codes, void* scale_bytes) {
  float* scales = static_cast<float*>(scale_bytes);
  kq::quantize_blockwise(x, n, block, kq::dynamic_map_signed(), static_cast<uint8_t*>(codes),
                         scales);
}
void decode_blockwise(const void* codes, int64_t n, int64_t block, const void* scale_bytes,
                      float* out) {
  const float* scales = static_cast<const float*>(scale_bytes);
  kq::dequantize_blockwise(static_cast<const uint8_t*>(codes), n, block, kq::dynamic_map_signed(),
                           scales, out);
}

// mxfp8-e4m3, mxfp8-e5m2, mxfp4, nvfp4: the block-format casts of kernels/cpu/mx run at one
// level on the n values as one row (MX: E8M0 bytes with torchao's default FLOOR scale; NVFP4:
// the fp32 per-tensor scale of the values' amax, then the E4M3 bytes).
void check_block(FormatId id, int64_t block, int64_t want) {
  MANTISSA_CHECK(block == want, "format table", "{} takes blocks of {}, got {}", format_name(id),
                 want, block);
}
template <FormatId F, km::Element E, SimdLevel L>
void encode_mx(const float* x, int64_t n, int64_t block, void* codes, void* scales) {
  check_block(F, block, km::kMxBlock);
  km::mx_quantize(x, kFloat32, 1, n, E, km::E8m0Rounding::kFloor, static_cast<uint8_t*>(codes),
                  static_cast<uint8_t*>(scales), L);
}
template <FormatId F, km::Element E, SimdLevel L>
void decode_mx(const void* codes, int64_t n, int64_t block, const void* scales, float* out) {
  check_block(F, block, km::kMxBlock);
  km::mx_dequantize(static_cast<const uint8_t*>(codes), static_cast<const uint8_t*>(scales), 1, n,
                    E, out, L);
}
template <FormatId F, km::Element E>
constexpr std::array<FormatKernel, 2> kMxKernels = {{
    {SimdLevel::kAvx2, encode_mx<F, E, SimdLevel::kAvx2>, decode_mx<F, E, SimdLevel::kAvx2>},
    {SimdLevel::kAvx512, encode_mx<F, E, SimdLevel::kAvx512>, decode_mx<F, E, SimdLevel::kAvx512>},
}};

template <SimdLevel L>
void encode_nvfp4(const float* x, int64_t n, int64_t block, void* codes, void* scales) {
  check_block(FormatId::kNvfp4, block, km::kNvfp4Block);
  km::Nvfp4Encoding e;
  e.tensor_scale = km::nvfp4_tensor_scale(x, kFloat32, n, L);
  std::memcpy(scales, &e.tensor_scale, sizeof(float));
  km::nvfp4_quantize(x, kFloat32, 1, n, e, static_cast<uint8_t*>(codes),
                     static_cast<uint8_t*>(scales) + sizeof(float), L);
}
template <SimdLevel L>
void decode_nvfp4(const void* codes, int64_t n, int64_t block, const void* scales, float* out) {
  check_block(FormatId::kNvfp4, block, km::kNvfp4Block);
  float tensor_scale;
  std::memcpy(&tensor_scale, scales, sizeof(float));
  km::nvfp4_dequantize(static_cast<const uint8_t*>(codes),
                       static_cast<const uint8_t*>(scales) + sizeof(float), 1, n, tensor_scale, out,
                       L);
}
constexpr std::array<FormatKernel, 2> kNvfp4Kernels = {{
    {SimdLevel::kAvx2, encode_nvfp4<SimdLevel::kAvx2>, decode_nvfp4<SimdLevel::kAvx2>},
    {SimdLevel::kAvx512, encode_nvfp4<SimdLevel::kAvx512>, decode_nvfp4<SimdLevel::kAvx512>},
}};

// e4m3 with 1x128 tiles or 128x128 blocks (FP8 block scaling, kernels/cpu/fp8/fp8_block.h): the
// n values as one row, TransformerEngine's default scales (powers of 2, epsilon 0); decoded
// code * scale_inv per tile.
template <FormatId F, SimdLevel L>
void encode_fp8_block(const float* x, int64_t n, int64_t block, void* codes, void* scales) {
  check_block(F, block, kf::kBlockLen);
  auto* c = static_cast<uint8_t*>(codes);
  auto* s = static_cast<float*>(scales);
  if (F == FormatId::kE4m3Block1x128)
    kf::quantize_1x128(x, kFloat32, 1, n, n, c, s, kFloat8_e4m3fn, true, 0.0f, L);
  else
    kf::quantize_128x128(x, kFloat32, 1, n, n, c, s, kFloat8_e4m3fn, true, 0.0f, L);
}
template <FormatId F, SimdLevel L>
void decode_fp8_block(const void* codes, int64_t n, int64_t block, const void* scales, float* out) {
  check_block(F, block, kf::kBlockLen);
  const auto* c = static_cast<const uint8_t*>(codes);
  const auto* s = static_cast<const float*>(scales);
  for (int64_t t = 0; t * block < n; ++t) {
    const int64_t len = std::min(block, n - t * block);
    kf::dequantize(c + t * block, kFloat8_e4m3fn, out + t * block, kFloat32, len, s[t], L);
  }
}
template <FormatId F>
constexpr std::array<FormatKernel, 2> kFp8BlockKernels = {{
    {SimdLevel::kAvx2, encode_fp8_block<F, SimdLevel::kAvx2>,
     decode_fp8_block<F, SimdLevel::kAvx2>},
    {SimdLevel::kAvx512, encode_fp8_block<F, SimdLevel::kAvx512>,
     decode_fp8_block<F, SimdLevel::kAvx512>},
}};

// THE table, in FormatId order. A 4-bit format adds one row like nf4's (with its code book in
// kernels/cpu/quant/four_bit_tables.h); the block formats' rows point at kernels/cpu/mx.
const std::array<FormatRow, 14> kRows = {{
    {.id = FormatId::kBf16,
     .name = "bf16",
     .element_bits = 16,
     .block_size = 0,
     .scale = ScaleFormat::kNone,
     .encode_reference = encode_16_scalar<bf16_bits>,
     .decode_reference = decode_16_scalar<bf16_value>,
     .kernels = kBf16Kernels},
    {.id = FormatId::kF16,
     .name = "f16",
     .element_bits = 16,
     .block_size = 0,
     .scale = ScaleFormat::kNone,
     .encode_reference = encode_16_scalar<half_bits>,
     .decode_reference = decode_16_scalar<half_value>,
     .kernels = kF16Kernels},
    {.id = FormatId::kE4m3,
     .name = "e4m3",
     .element_bits = 8,
     .block_size = 0,
     .scale = ScaleFormat::kFp32PerTensor,
     .encode_reference = encode_fp8<kf::detail::scaled_cast_scalar, DType::Id::f8_e4m3>,
     .decode_reference = decode_fp8<kf::detail::dequantize_scalar, DType::Id::f8_e4m3>,
     .kernels = kFp8Kernels<DType::Id::f8_e4m3>},
    {.id = FormatId::kE5m2,
     .name = "e5m2",
     .element_bits = 8,
     .block_size = 0,
     .scale = ScaleFormat::kFp32PerTensor,
     .encode_reference = encode_fp8<kf::detail::scaled_cast_scalar, DType::Id::f8_e5m2>,
     .decode_reference = decode_fp8<kf::detail::dequantize_scalar, DType::Id::f8_e5m2>,
     .kernels = kFp8Kernels<DType::Id::f8_e5m2>},
    {.id = FormatId::kNf4,
     .name = "nf4",
     .element_bits = 4,
     .block_size = 64,
     .scale = ScaleFormat::kFp32PerBlock,
     .encode_reference = encode_four_bit_scalar<FormatId::kNf4>,
     .decode_reference = decode_four_bit_scalar<FormatId::kNf4>,
     .kernels = kFourBitKernels<FormatId::kNf4>},
    {.id = FormatId::kFp4,
     .name = "fp4",
     .element_bits = 4,
     .block_size = 64,
     .scale = ScaleFormat::kFp32PerBlock,
     .encode_reference = encode_four_bit_scalar<FormatId::kFp4>,
     .decode_reference = decode_four_bit_scalar<FormatId::kFp4>,
     .kernels = kFourBitKernels<FormatId::kFp4>},
    {.id = FormatId::kInt8Rowwise,
     .name = "int8-rowwise",
     .element_bits = 8,
     .block_size = 0,
     .scale = ScaleFormat::kFp32PerRow,
     .encode_reference = encode_int8_rows<SimdLevel::kScalar>,
     .decode_reference = decode_int8_rows<SimdLevel::kScalar>,
     .kernels = kInt8RowKernels},
    {.id = FormatId::kBlockwiseDynamic8,
     .name = "blockwise-dynamic-8bit",
     .element_bits = 8,
     .block_size = 256,
     .scale = ScaleFormat::kFp32PerBlock,
     .encode_reference = encode_blockwise,
     .decode_reference = decode_blockwise,
     .kernels = {}},
    {.id = FormatId::kMxfp8E4m3,
     .name = "mxfp8-e4m3",
     .element_bits = 8,
     .block_size = km::kMxBlock,
     .scale = ScaleFormat::kE8m0PerBlock,
     .encode_reference = encode_mx<FormatId::kMxfp8E4m3, km::Element::kE4m3, SimdLevel::kScalar>,
     .decode_reference = decode_mx<FormatId::kMxfp8E4m3, km::Element::kE4m3, SimdLevel::kScalar>,
     .kernels = kMxKernels<FormatId::kMxfp8E4m3, km::Element::kE4m3>},
    {.id = FormatId::kMxfp8E5m2,
     .name = "mxfp8-e5m2",
     .element_bits = 8,
     .block_size = km::kMxBlock,
     .scale = ScaleFormat::kE8m0PerBlock,
     .encode_reference = encode_mx<FormatId::kMxfp8E5m2, km::Element::kE5m2, SimdLevel::kScalar>,
     .decode_reference = decode_mx<FormatId::kMxfp8E5m2, km::Element::kE5m2, SimdLevel::kScalar>,
     .kernels = kMxKernels<FormatId::kMxfp8E5m2, km::Element::kE5m2>},
    {.id = FormatId::kMxfp4,
     .name = "mxfp4",
     .element_bits = 4,
     .block_size = km::kMxBlock,
     .scale = ScaleFormat::kE8m0PerBlock,
     .encode_reference = encode_mx<FormatId::kMxfp4, km::Element::kE2m1, SimdLevel::kScalar>,
     .decode_reference = decode_mx<FormatId::kMxfp4, km::Element::kE2m1, SimdLevel::kScalar>,
     .kernels = kMxKernels<FormatId::kMxfp4, km::Element::kE2m1>},
    {.id = FormatId::kNvfp4,
     .name = "nvfp4",
     .element_bits = 4,
     .block_size = km::kNvfp4Block,
     .scale = ScaleFormat::kE4m3PerBlockFp32PerTensor,
     .encode_reference = encode_nvfp4<SimdLevel::kScalar>,
     .decode_reference = decode_nvfp4<SimdLevel::kScalar>,
     .kernels = kNvfp4Kernels},
    {.id = FormatId::kE4m3Block1x128,
     .name = "e4m3-block-1x128",
     .element_bits = 8,
     .block_size = kf::kBlockLen,
     .scale = ScaleFormat::kFp32Per1x128Tile,
     .encode_reference = encode_fp8_block<FormatId::kE4m3Block1x128, SimdLevel::kScalar>,
     .decode_reference = decode_fp8_block<FormatId::kE4m3Block1x128, SimdLevel::kScalar>,
     .kernels = kFp8BlockKernels<FormatId::kE4m3Block1x128>},
    {.id = FormatId::kE4m3Block128x128,
     .name = "e4m3-block-128x128",
     .element_bits = 8,
     .block_size = kf::kBlockLen,
     .scale = ScaleFormat::kFp32Per128x128Block,
     .encode_reference = encode_fp8_block<FormatId::kE4m3Block128x128, SimdLevel::kScalar>,
     .decode_reference = decode_fp8_block<FormatId::kE4m3Block128x128, SimdLevel::kScalar>,
     .kernels = kFp8BlockKernels<FormatId::kE4m3Block128x128>},
}};

}  // namespace

std::string_view scale_format_name(ScaleFormat scale) {
  switch (scale) {
    case ScaleFormat::kNone:
      return "none";
    case ScaleFormat::kFp32PerTensor:
      return "fp32 per tensor";
    case ScaleFormat::kFp32PerBlock:
      return "fp32 per block";
    case ScaleFormat::kFp32PerRow:
      return "fp32 per row";
    case ScaleFormat::kE8m0PerBlock:
      return "e8m0 per block";
    case ScaleFormat::kE4m3PerBlockFp32PerTensor:
      return "e4m3 per block, fp32 per tensor";
    case ScaleFormat::kFp32Per1x128Tile:
      return "fp32 per 1x128 tile";
    case ScaleFormat::kFp32Per128x128Block:
      return "fp32 per 128x128 block";
  }
  return "?";
}

int64_t code_buffer_bytes(const FormatRow& row, int64_t n) {
  return (n * row.element_bits + 7) / 8;
}

int64_t scale_buffer_bytes(const FormatRow& row, int64_t n, int64_t block) {
  const int64_t blocks = block > 0 ? (n + block - 1) / block : 0;
  switch (row.scale) {
    case ScaleFormat::kNone:
      return 0;
    case ScaleFormat::kFp32PerTensor:
      return sizeof(float);
    case ScaleFormat::kFp32PerBlock:
    case ScaleFormat::kFp32PerRow:
    case ScaleFormat::kFp32Per1x128Tile:
    case ScaleFormat::kFp32Per128x128Block:
      return blocks * static_cast<int64_t>(sizeof(float));
    case ScaleFormat::kE8m0PerBlock:
      return blocks;
    case ScaleFormat::kE4m3PerBlockFp32PerTensor:
      return static_cast<int64_t>(sizeof(float)) + blocks;
  }
  return 0;
}

std::span<const FormatRow> format_table() { return kRows; }

const FormatRow& format_row(FormatId id) {
  const auto i = static_cast<size_t>(id);
  MANTISSA_CHECK(i < kRows.size() && kRows[i].id == id, "format_row", "no row for format id {}", i);
  return kRows[i];
}

bool has_layout(FormatId id, int bits, ScaleFormat scale) {
  const FormatRow& row = format_row(id);
  return row.element_bits == bits && row.scale == scale;
}

const FormatRow& format_row(std::string_view name) {
  for (const FormatRow& row : kRows)
    if (row.name == name) return row;
  std::vector<std::string_view> names;
  for (const FormatRow& row : kRows) names.push_back(row.name);
  fail("format_row", "unknown format \"{}\"; the formats are: {}", name, fmt::join(names, ", "));
}

std::string_view format_name(FormatId id) { return format_row(id).name; }

EncodeFn encoder(const FormatRow& row, SimdLevel level) {
  EncodeFn fn = row.encode_reference;
  for (const FormatKernel& k : row.kernels)
    if (k.level <= level && k.encode != nullptr) fn = k.encode;
  return fn;
}

DecodeFn decoder(const FormatRow& row, SimdLevel level) {
  DecodeFn fn = row.decode_reference;
  for (const FormatKernel& k : row.kernels)
    if (k.level <= level && k.decode != nullptr) fn = k.decode;
  return fn;
}

}  // namespace mantissa::formats
