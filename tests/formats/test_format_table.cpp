// The format table: each row's facts, every SIMD kernel a row registers against the row's
// scalar reference (same codes, scales and decoded bits), and the references against the bulk
// paths the library runs (core's conversions, fp8's casts, quant's quantizers) and known bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/fp8/fp8_cast.h"
#include "kernels/cpu/quant/blockwise_dynamic.h"
#include "mantissa/core/convert.h"
#include "mantissa/formats/block_formats.h"
#include "mantissa/formats/format_table.h"
#include "mantissa/quant/int8.h"
#include "mantissa/quant/quantize.h"
#include "support/test_util.h"

namespace mantissa::formats {
namespace {

using namespace mantissa::testing;

struct Facts {
  FormatId id;
  const char* name;
  int bits;
  int64_t block;
  ScaleFormat scale;
};

TEST(FormatTable, RowsHoldEachFormatsFacts) {
  const std::vector<Facts> expected = {
      {FormatId::kBf16, "bf16", 16, 0, ScaleFormat::kNone},
      {FormatId::kF16, "f16", 16, 0, ScaleFormat::kNone},
      {FormatId::kE4m3, "e4m3", 8, 0, ScaleFormat::kFp32PerTensor},
      {FormatId::kE5m2, "e5m2", 8, 0, ScaleFormat::kFp32PerTensor},
      {FormatId::kNf4, "nf4", 4, 64, ScaleFormat::kFp32PerBlock},
      {FormatId::kFp4, "fp4", 4, 64, ScaleFormat::kFp32PerBlock},
      {FormatId::kInt8Rowwise, "int8-rowwise", 8, 0, ScaleFormat::kFp32PerRow},
      {FormatId::kBlockwiseDynamic8, "blockwise-dynamic-8bit", 8, 256, ScaleFormat::kFp32PerBlock},
      {FormatId::kMxfp8E4m3, "mxfp8-e4m3", 8, 32, ScaleFormat::kE8m0PerBlock},
      {FormatId::kMxfp8E5m2, "mxfp8-e5m2", 8, 32, ScaleFormat::kE8m0PerBlock},
      {FormatId::kMxfp4, "mxfp4", 4, 32, ScaleFormat::kE8m0PerBlock},
      {FormatId::kNvfp4, "nvfp4", 4, 16, ScaleFormat::kE4m3PerBlockFp32PerTensor},
      {FormatId::kE4m3Block1x128, "e4m3-block-1x128", 8, 128, ScaleFormat::kFp32Per1x128Tile},
      {FormatId::kE4m3Block128x128, "e4m3-block-128x128", 8, 128,
       ScaleFormat::kFp32Per128x128Block}};
  ASSERT_EQ(format_table().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const FormatRow& row = format_table()[i];
    SCOPED_TRACE(expected[i].name);
    EXPECT_EQ(row.id, expected[i].id);
    EXPECT_EQ(&format_row(expected[i].id), &row);
    EXPECT_EQ(&format_row(std::string_view(expected[i].name)), &row);
    EXPECT_EQ(row.name, expected[i].name);
    EXPECT_EQ(format_name(row.id), expected[i].name);
    EXPECT_EQ(row.element_bits, expected[i].bits);
    EXPECT_EQ(row.block_size, expected[i].block);
    EXPECT_EQ(row.scale, expected[i].scale);
    EXPECT_NE(row.encode_reference, nullptr);
    EXPECT_NE(row.decode_reference, nullptr);
  }
  EXPECT_EQ(scale_format_name(ScaleFormat::kFp32PerBlock), "fp32 per block");
  EXPECT_EQ(scale_format_name(ScaleFormat::kE8m0PerBlock), "e8m0 per block");
  EXPECT_EQ(scale_format_name(ScaleFormat::kE4m3PerBlockFp32PerTensor),
            "e4m3 per block, fp32 per tensor");
  expect_error([] { format_row(std::string_view("nf3")); },
               {"unknown format \"nf3\"",
                "bf16, f16, e4m3, e5m2, nf4, fp4, int8-rowwise, "
                "blockwise-dynamic-8bit, mxfp8-e4m3, mxfp8-e5m2, mxfp4, nvfp4"});
}

// What one encode gives: the codes' bytes and the scales' bytes (fp32 values, E8M0 or E4M3
// bytes, as the row's scale format says).
struct Encoded {
  std::vector<uint8_t> codes;
  std::vector<uint8_t> scales;
};

constexpr int64_t kN = 1000;  // not a multiple of 32 or 16: the block formats' last block is short

int64_t block_of(const FormatRow& row) {
  return row.scale == ScaleFormat::kFp32PerRow ? 100 : row.block_size;
}

void set_tensor_scale(const FormatRow& row, std::vector<uint8_t>& scales, float value) {
  if (row.scale == ScaleFormat::kFp32PerTensor) std::memcpy(scales.data(), &value, sizeof value);
}

Encoded encode_with(const FormatRow& row, EncodeFn fn, const std::vector<float>& x) {
  Encoded e;
  e.codes.assign(static_cast<size_t>(code_buffer_bytes(row, kN)), 0);
  e.scales.assign(static_cast<size_t>(scale_buffer_bytes(row, kN, block_of(row))), 0);
  set_tensor_scale(row, e.scales, 2.0f);  // the delayed scale
  fn(x.data(), kN, block_of(row), e.codes.data(), e.scales.data());
  return e;
}

std::vector<uint32_t> decode_bits(const FormatRow& row, DecodeFn fn, const Encoded& e) {
  std::vector<float> out(kN);
  std::vector<uint8_t> scales = e.scales;
  set_tensor_scale(row, scales, 0.5f);  // the inverse scale
  fn(e.codes.data(), kN, block_of(row), scales.data(), out.data());
  std::vector<uint32_t> bits(kN);
  std::memcpy(bits.data(), out.data(), sizeof(float) * kN);
  return bits;
}

std::vector<float> floats_of(const std::vector<uint8_t>& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

std::vector<float> sample_values() {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(kN);
  for (float& v : x) v = normal(gen);
  x[3] = 0.0f;
  x[10] = -0.0f;
  x[17] = 1e-30f;  // subnormal territory for the narrow formats
  x[40] = 250.0f;  // past e4m3's range once scaled by 2
  return x;
}

TEST(FormatTable, EveryKernelGivesTheReferencesBits) {
  const std::vector<float> x = sample_values();
  int kernels_run = 0;
  for (const FormatRow& row : format_table()) {
    const Encoded ref = encode_with(row, row.encode_reference, x);
    const std::vector<uint32_t> ref_decoded = decode_bits(row, row.decode_reference, ref);
    for (const FormatKernel& k : row.kernels) {
      if (k.level > simd_level()) continue;
      SCOPED_TRACE(fmt::format("{} at {}", row.name, simd_level_name(k.level)));
      if (k.encode != nullptr) {
        const Encoded got = encode_with(row, k.encode, x);
        EXPECT_EQ(got.codes, ref.codes);
        EXPECT_EQ(got.scales, ref.scales);
        ++kernels_run;
      }
      if (k.decode != nullptr) {
        EXPECT_EQ(decode_bits(row, k.decode, ref), ref_decoded);
        ++kernels_run;
      }
    }
    // What a bulk path of this CPU chooses is the reference or one of the row's kernels.
    EXPECT_EQ(encode_with(row, encoder(row), x).codes, ref.codes) << row.name;
    EXPECT_EQ(decode_bits(row, decoder(row), ref), ref_decoded) << row.name;
  }
  if (simd_level() >= SimdLevel::kAvx2) EXPECT_GT(kernels_run, 0);
}

TEST(FormatTable, ReferencesAreTheLibrarysPaths) {
  const std::vector<float> x = sample_values();
  const Tensor t = from_buffer(x.data(), kFloat32, {10, 100});
  // bf16 and f16: core's bulk conversions.
  for (FormatId id : {FormatId::kBf16, FormatId::kF16}) {
    const Encoded e = encode_with(format_row(id), format_row(id).encode_reference, x);
    std::vector<uint16_t> bulk(kN);
    if (id == FormatId::kBf16)
      convert_f32_to_bf16(x.data(), bulk.data(), kN);
    else
      convert_f32_to_f16(x.data(), bulk.data(), kN);
    EXPECT_EQ(std::memcmp(e.codes.data(), bulk.data(), e.codes.size()), 0) << format_name(id);
  }
  // e4m3 and e5m2: fp8's delayed-scaling cast.
  for (auto [id, dtype] :
       {std::pair{FormatId::kE4m3, kFloat8_e4m3fn}, std::pair{FormatId::kE5m2, kFloat8_e5m2}}) {
    const Encoded e = encode_with(format_row(id), format_row(id).encode_reference, x);
    std::vector<uint8_t> bulk(kN);
    kernels::fp8::scaled_cast(x.data(), kFloat32, bulk.data(), kN, 2.0f, dtype);
    EXPECT_EQ(e.codes, bulk) << format_name(id);
  }
  // nf4 and fp4: quant's quantize_4bit (the bytes bitsandbytes writes; tests/quant pins them).
  for (FormatId id : {FormatId::kNf4, FormatId::kFp4}) {
    const Encoded e = encode_with(format_row(id), format_row(id).encode_reference, x);
    const QuantizedTensor q = quant::quantize_4bit(t, {.format = id, .blocksize = 64});
    EXPECT_EQ(e.codes, q.data.to_vector<uint8_t>()) << format_name(id);
    EXPECT_EQ(floats_of(e.scales), q.absmax.to_vector<float>()) << format_name(id);
  }
  // int8-rowwise: LLM.int8's weight quantizer (CB, SCB).
  {
    const FormatRow& row = format_row(FormatId::kInt8Rowwise);
    const Encoded e = encode_with(row, row.encode_reference, x);
    const QuantizedTensor q = quant::quantize_int8_weight(t);
    const auto cb = q.data.to_vector<int8_t>();
    EXPECT_EQ(std::memcmp(e.codes.data(), cb.data(), cb.size()), 0);
    EXPECT_EQ(floats_of(e.scales), q.absmax.to_vector<float>());
  }
  // blockwise-dynamic-8bit: the signed dynamic map in blocks of 256.
  {
    const FormatRow& row = format_row(FormatId::kBlockwiseDynamic8);
    const Encoded e = encode_with(row, row.encode_reference, x);
    std::vector<uint8_t> codes(kN);
    std::vector<float> absmax(4);
    kernels::quant::quantize_blockwise(x.data(), kN, 256, kernels::quant::dynamic_map_signed(),
                                       codes.data(), absmax.data());
    EXPECT_EQ(e.codes, codes);
    EXPECT_EQ(floats_of(e.scales), absmax);
  }
  // The block formats: the API a recipe calls (FLOOR scales for MX; NVFP4's scales are its fp32
  // per-tensor scale, then the E4M3 bytes).
  for (FormatId id : {FormatId::kMxfp8E4m3, FormatId::kMxfp8E5m2, FormatId::kMxfp4}) {
    const Encoded e = encode_with(format_row(id), format_row(id).encode_reference, x);
    const BlockQuantized q =
        id == FormatId::kMxfp4 ? quantize_mxfp4(x, 1, kN) : quantize_mxfp8(x, 1, kN, id);
    EXPECT_EQ(e.codes, q.codes) << format_name(id);
    EXPECT_EQ(e.scales, q.scales) << format_name(id);
  }
  {
    const Encoded e =
        encode_with(format_row(FormatId::kNvfp4), format_row(FormatId::kNvfp4).encode_reference, x);
    const BlockQuantized q = quantize_nvfp4(x, 1, kN);
    EXPECT_EQ(e.codes, q.codes);
    EXPECT_EQ(floats_of(e.scales)[0], q.tensor_scale);
    EXPECT_EQ(std::vector<uint8_t>(e.scales.begin() + 4, e.scales.end()), q.scales);
  }
}

// Known codes: the table's references give the bits the formats define.
TEST(FormatTable, ReferencesGiveKnownBits) {
  const auto encode_one = [](FormatId id, std::vector<float> x, int64_t block, float scale) {
    const FormatRow& row = format_row(id);
    std::vector<uint8_t> codes((x.size() * row.element_bits + 7) / 8);
    std::vector<float> scales(x.size() + 1, scale);
    row.encode_reference(x.data(), static_cast<int64_t>(x.size()), block, codes.data(),
                         scales.data());
    return std::make_pair(codes, scales);
  };
  EXPECT_EQ(encode_one(FormatId::kBf16, {1.0f}, 0, 0).first, (std::vector<uint8_t>{0x80, 0x3F}));
  EXPECT_EQ(encode_one(FormatId::kF16, {1.0f}, 0, 0).first, (std::vector<uint8_t>{0x00, 0x3C}));
  // 448 is e4m3's largest finite value (0x7E); 1000 saturates to it; e5m2's 1.0 is 0x3C.
  EXPECT_EQ(encode_one(FormatId::kE4m3, {224.0f, 500.0f}, 0, 2.0f).first,
            (std::vector<uint8_t>{0x7E, 0x7E}));
  EXPECT_EQ(encode_one(FormatId::kE5m2, {0.5f}, 0, 2.0f).first, (std::vector<uint8_t>{0x3C}));
  // nf4: -1 is code 0, 0 is code 7, +1 is code 15 (absmax 2 scales 2 to 1).
  const auto [nf4, nf4_absmax] = encode_one(FormatId::kNf4, {-2.0f, 0.0f, 2.0f, 0.0f}, 64, 0);
  EXPECT_EQ(nf4, (std::vector<uint8_t>{0x07, 0xF7}));
  EXPECT_EQ(nf4_absmax[0], 2.0f);
  // int8-rowwise: 127 * v / absmax, rounded half to even.
  const auto [i8, i8_absmax] = encode_one(FormatId::kInt8Rowwise, {-4.0f, 2.0f, 1.0f, 0.0f}, 4, 0);
  EXPECT_EQ(i8, (std::vector<uint8_t>{0x81, 0x40, 0x20, 0x00}));
  EXPECT_EQ(i8_absmax[0], 4.0f);
  // mxfp8-e4m3: amax 448 = 1.75 * 2^8 gives E8M0 2^(8 - 8) = 127 (FLOOR), 448 -> 0x7E, -1 -> 0xB8;
  // amax 1000 gives 2^(9 - 8) (code 128) and 1000 / 2 = 500 saturates to 448.
  auto mx = [](FormatId id, std::vector<float> x) {
    const FormatRow& row = format_row(id);
    std::vector<uint8_t> codes(code_buffer_bytes(row, static_cast<int64_t>(x.size())));
    std::vector<uint8_t> scales(scale_buffer_bytes(row, static_cast<int64_t>(x.size()), 32));
    row.encode_reference(x.data(), static_cast<int64_t>(x.size()), 32, codes.data(), scales.data());
    codes.insert(codes.begin(), scales.begin(), scales.end());
    return codes;
  };
  EXPECT_EQ(mx(FormatId::kMxfp8E4m3, {448.0f, -1.0f}), (std::vector<uint8_t>{127, 0x7E, 0xB8}));
  EXPECT_EQ(mx(FormatId::kMxfp8E4m3, {1000.0f, 0.0f}), (std::vector<uint8_t>{128, 0x7E, 0x00}));
  // mxfp4: amax 6 = 1.5 * 2^2 gives 2^(2 - 2) (127); 6 -> 7, -0.5 -> 0x9, 1.25 -> 2 (tie to even),
  // packed low nibble first.
  EXPECT_EQ(mx(FormatId::kMxfp4, {6.0f, -0.5f, 1.25f}), (std::vector<uint8_t>{127, 0x97, 0x02}));
  // A block format takes only its own block.
  expect_error(
      [] {
        std::vector<float> x(4);
        std::vector<uint8_t> c(4), s(1);
        format_row(FormatId::kMxfp8E4m3).encode_reference(x.data(), 4, 64, c.data(), s.data());
      },
      "mxfp8-e4m3 takes blocks of 32, got 64");
}

}  // namespace
}  // namespace mantissa::formats
