// NF4/FP4 quantization against bytes written by bitsandbytes' CPU code (tests/fixtures/quant,
// scripts/make_quant_fixtures.py), the worked example of docs/quantization.md, every SIMD level
// against the scalar one, double quantization and the memory accounting.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/cpu/quant/four_bit.h"
#include "mantissa/core/allocator.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/generator.h"
#include "mantissa/core/half.h"
#include "mantissa/formats/format_table.h"
#include "mantissa/quant/quantize.h"
#include "quant/quant_fixtures.h"
#include "quant/torch_float_sum.h"

namespace mantissa::quant {
namespace {

using namespace testing;
namespace kq = kernels::quant;

std::vector<SimdLevel> levels_here() {
  std::vector<SimdLevel> l = {SimdLevel::kScalar};
  if (simd_level() >= SimdLevel::kAvx2) l.push_back(SimdLevel::kAvx2);
  return l;
}

// Same float bits, NaN payloads aside; reports the first differing element.
// With `zero_sign_free`, +0 and -0 count as equal: bitsandbytes' CPU backend decodes FP4 code 8
// as +0 for tensors with an odd last dimension (its PyTorch fallback) and -0 otherwise.
void expect_same_bits(const Tensor& got, const Tensor& want, bool zero_sign_free = false) {
  const auto a = bits_of(got), b = bits_of(want);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const bool nan_a = (a[i] & 0x7FFFFFFFu) > 0x7F800000u,
               nan_b = (b[i] & 0x7FFFFFFFu) > 0x7F800000u;
    if (nan_a && nan_b) continue;
    if (zero_sign_free && (a[i] & 0x7FFFFFFFu) == 0 && (b[i] & 0x7FFFFFFFu) == 0) continue;
    ASSERT_EQ(a[i], b[i]) << "element " << i;
  }
}

struct Case {
  FormatId format;
  const char* file;
};

class FourBitFixture : public ::testing::TestWithParam<Case> {};

TEST_P(FourBitFixture, QuantizeMatchesBitsandbytesBytes) {
  const auto fx = load_fixture(GetParam().file);
  for (const char* name : {"rand", "tail", "odd", "edge", "rand_bf16"}) {
    SCOPED_TRACE(name);
    const std::string p = name;
    const Tensor input = fx.at(p + ".input");
    const QuantizedTensor q = quantize_4bit(input, {GetParam().format, 64, false});
    EXPECT_EQ(q.shape, input.shape());
    EXPECT_EQ(q.dtype, input.dtype());
    EXPECT_EQ(q.data.shape(), fx.at(p + ".packed").shape());
    EXPECT_EQ(values_of<uint8_t>(q.data), values_of<uint8_t>(fx.at(p + ".packed")));
    EXPECT_EQ(bits_of(q.absmax), bits_of(fx.at(p + ".absmax")));
    // Each kernel level on its own gives the same bytes.
    const Tensor f = input.to(kFloat32).contiguous();
    const int64_t n = f.numel();
    for (SimdLevel level : levels_here()) {
      std::vector<uint8_t> packed(static_cast<size_t>((n + 1) / 2));
      std::vector<float> absmax(static_cast<size_t>((n + 63) / 64));
      const auto type = GetParam().format;
      kq::quantize_4bit(f.data<float>(), 0, n, n, 64, type, packed.data(), absmax.data(), level);
      EXPECT_EQ(packed, values_of<uint8_t>(fx.at(p + ".packed"))) << simd_level_name(level);
    }
  }
}

TEST_P(FourBitFixture, DequantizeMatchesBitsandbytes) {
  const auto fx = load_fixture(GetParam().file);
  for (const char* name : {"rand", "tail", "odd", "edge", "rand_bf16"}) {
    SCOPED_TRACE(name);
    const std::string p = name;
    const QuantizedTensor q = quantize_4bit(fx.at(p + ".input"), {GetParam().format, 64, false});
    // bitsandbytes returns the input's dtype: its fp32 numbers of a bf16 weight are bf16.
    const Tensor f32 = dequantize(q, q.dtype == kFloat32 ? kFloat32 : q.dtype).to(kFloat32);
    EXPECT_EQ(f32.shape(), q.shape);
    const bool odd_last_dim = q.shape.back() % 2 == 1;
    expect_same_bits(f32, fx.at(p + ".deq_f32"), odd_last_dim);
    expect_same_bits(dequantize(q, kBFloat16).to(kFloat32), fx.at(p + ".deq_bf16").to(kFloat32),
                     odd_last_dim);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, FourBitFixture,
                         ::testing::Values(Case{FormatId::kNf4, "nf4_quantize.safetensors"},
                                           Case{FormatId::kFp4, "fp4_quantize.safetensors"}),
                         [](const auto& info) {
                           return std::string(formats::format_name(info.param.format));
                         });

// docs/quantization.md: one block of x_k = (k - 32) / 32.
TEST(FourBit, WorkedExampleBytes) {
  std::vector<float> x(64);
  for (int k = 0; k < 64; ++k) x[k] = static_cast<float>(k - 32) / 32.0f;
  const std::vector<uint8_t> nf4 = {0x00, 0x00, 0x01, 0x11, 0x11, 0x11, 0x12, 0x22,
                                    0x22, 0x33, 0x33, 0x44, 0x45, 0x55, 0x66, 0x67,
                                    0x77, 0x88, 0x99, 0x9A, 0xAA, 0xBB, 0xBC, 0xCC,
                                    0xCD, 0xDD, 0xDE, 0xEE, 0xEE, 0xEE, 0xFF, 0xFF};
  const std::vector<uint8_t> fp4 = {0xBB, 0xBB, 0xBB, 0xAA, 0xAA, 0xAA, 0xAA, 0xDD,
                                    0xDD, 0xDC, 0xCC, 0xCF, 0xFF, 0xEE, 0xEE, 0x99,
                                    0x01, 0x16, 0x66, 0x67, 0x77, 0x44, 0x44, 0x55,
                                    0x55, 0x52, 0x22, 0x22, 0x22, 0x23, 0x33, 0x33};
  for (float scale : {1.0f, 3.0f}) {
    std::vector<float> xs(x);
    for (float& v : xs) v *= scale;
    const Tensor t = tensor(xs);
    const QuantizedTensor a = quantize_4bit(t, {FormatId::kNf4});
    const QuantizedTensor b = quantize_4bit(t, {FormatId::kFp4});
    EXPECT_EQ(values_of<uint8_t>(a.data), nf4);
    EXPECT_EQ(values_of<uint8_t>(b.data), fp4);
    EXPECT_EQ(a.absmax.to_vector<float>(), std::vector<float>{scale});
  }
}

TEST(FourBit, NanAndInfinityFollowBitsandbytes) {
  // NaN makes the block's absmax NaN and every code the last sorted slot (NF4 15, FP4 3);
  // an infinite absmax scales the finite values to 0 and the infinity itself to NaN.
  std::vector<float> x(128, 0.0f);
  x[0] = NAN;
  x[1] = 0.5f;
  x[64] = INFINITY;
  x[65] = 0.5f;
  x[66] = -0.5f;
  const QuantizedTensor a = quantize_4bit(tensor(x), {FormatId::kNf4});
  const auto bytes = values_of<uint8_t>(a.data);
  EXPECT_EQ(bytes[0], 0xFF);
  EXPECT_EQ(bytes[32], 0xF7);
  EXPECT_EQ(bytes[33], 0x77);
  const QuantizedTensor b = quantize_4bit(tensor(x), {FormatId::kFp4});
  EXPECT_EQ(values_of<uint8_t>(b.data)[0], 0x33);
  EXPECT_EQ(values_of<uint8_t>(b.data)[32], 0x30);
  EXPECT_EQ(values_of<uint8_t>(b.data)[33], 0x00);
  EXPECT_TRUE(std::isnan(a.absmax.to_vector<float>()[0]));
  EXPECT_TRUE(std::isinf(a.absmax.to_vector<float>()[1]));
}

TEST(FourBit, SimdDequantizeMatchesScalarOnEveryRange) {
  if (simd_level() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  const auto fx = load_fixture("nf4_quantize.safetensors");
  for (auto type : {FormatId::kNf4, FormatId::kFp4}) {
    const QuantizedTensor q = quantize_4bit(fx.at("rand.input"), {type, 64, false});
    const int64_t n = q.numel();
    for (int64_t first : {0, 1, 5, 16, 17, 63, 64, 100}) {
      for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{16}, int64_t{33},
                            int64_t{200}, n - first}) {
        if (first + count > n) continue;
        std::vector<float> s(static_cast<size_t>(count)), v(static_cast<size_t>(count));
        kq::dequantize_4bit(q.data.data<uint8_t>(), q.absmax.data<float>(), first, count, 64, type,
                            s.data(), SimdLevel::kScalar);
        kq::dequantize_4bit(q.data.data<uint8_t>(), q.absmax.data<float>(), first, count, 64, type,
                            v.data(), SimdLevel::kAvx2);
        EXPECT_EQ(0, std::memcmp(s.data(), v.data(), s.size() * 4)) << first << "+" << count;
      }
    }
  }
}

// dequantize_4bit_16 (straight to bf16/fp16; AVX-512: one rounded table per block and word
// permutes) gives the bits of the float32 decode rounded by the scalar conversions, at every
// level, for every range start (odd ones included), several block sizes, and blocks whose
// absmax is NaN, infinite, subnormal or zero, writing nothing past the range.
TEST(FourBit, HalfDequantizeMatchesFloatDecodeRounded) {
  const auto fx = load_fixture("nf4_quantize.safetensors");
  std::vector<SimdLevel> levels = levels_here();
  if (simd_level() >= SimdLevel::kAvx512) levels.push_back(SimdLevel::kAvx512);
  if (simd_level() >= SimdLevel::kAvx512Bf16) levels.push_back(SimdLevel::kAvx512Bf16);
  for (auto type : {FormatId::kNf4, FormatId::kFp4}) {
    for (int64_t bs : {int64_t{32}, int64_t{64}, int64_t{128}, int64_t{256}}) {
      QuantizedTensor q = quantize_4bit(fx.at("rand.input"), {type, bs, false});
      float* am = q.absmax.data<float>();
      ASSERT_GE(q.absmax.numel(), 5);
      am[1] = std::nanf("");
      am[2] = INFINITY;
      am[3] = 1e-40f;  // subnormal: products round to bf16/fp16 subnormals or zero
      am[4] = 0.0f;
      if (q.absmax.numel() > 7) {
        am[5] = -0.0f;
        am[6] = 3e-31f;     // normal, but below 2^-100: its products are subnormal in fp32
        am[7] = 0x1p-100f;  // the smallest absmax the AVX-512 BF16 table rounds natively
      }
      const int64_t n = q.numel();
      for (int64_t first : {int64_t{0}, int64_t{1}, int64_t{7}, bs - 1, bs + 3}) {
        for (int64_t count : {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{129}, n - first}) {
          if (first + count > n) continue;
          std::vector<float> f(static_cast<size_t>(count));
          kq::dequantize_4bit(q.data.data<uint8_t>(), am, first, count, bs, type, f.data(),
                              SimdLevel::kScalar);
          for (bool bf16 : {true, false}) {
            std::vector<uint16_t> want(f.size());
            for (size_t i = 0; i < f.size(); ++i)
              want[i] = bf16 ? float_to_bf16_bits(f[i]) : float_to_half_bits(f[i]);
            for (SimdLevel level : levels) {
              // 16 guard words after the range: nothing is written past its end.
              std::vector<uint16_t> got(f.size() + 16, 0xDEAD);
              kq::dequantize_4bit_16(q.data.data<uint8_t>(), am, first, count, bs, type, bf16,
                                     got.data(), level);
              for (size_t g = f.size(); g < got.size(); ++g) EXPECT_EQ(got[g], 0xDEAD) << g;
              got.resize(f.size());
              size_t bad = 0;
              while (bad < got.size() && got[bad] == want[bad]) ++bad;
              EXPECT_EQ(bad, got.size())
                  << "level " << simd_level_name(level) << (bf16 ? " bf16" : " f16") << " bs " << bs
                  << " " << first << "+" << count << ": element " << bad << " is 0x" << std::hex
                  << (bad < got.size() ? got[bad] : 0) << ", want 0x"
                  << (bad < got.size() ? want[bad] : 0);
            }
          }
        }
      }
    }
  }
}

TEST(FourBit, DoubleQuantMatchesBitsandbytes) {
  const auto fx = load_fixture("nf4_dq.safetensors");
  const QuantizedTensor q = quantize_4bit(fx.at("dq_rand.input"), {FormatId::kNf4, 64, true});
  ASSERT_TRUE(q.has_nested);
  EXPECT_EQ(values_of<uint8_t>(q.data), values_of<uint8_t>(fx.at("dq_rand.packed")));
  EXPECT_EQ(values_of<uint8_t>(q.absmax), values_of<uint8_t>(fx.at("dq_rand.qabsmax")));
  EXPECT_EQ(bits_of(q.nested.absmax), bits_of(fx.at("dq_rand.absmax2")));
  EXPECT_EQ(bits_of(q.nested.code), bits_of(fx.at("dq_rand.code2")));
  EXPECT_EQ(q.nested.offset, fx.at("dq_rand.offset").to_vector<float>()[0]);
  EXPECT_EQ(bits_of(dequantize(q)), bits_of(fx.at("dq_rand.deq_f32")));

  // 600 blocks: three nested blocks of 256, the last one partial (FP4 this time).
  const auto w = hash_floats(600 * 64, 99);
  const auto rows = hash_floats(300, 5);
  std::vector<float> v(w.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = (w[i] - 1.0f) * rows[i / 128];
  const QuantizedTensor h = quantize_4bit(tensor(v, {300, 128}), {FormatId::kFp4, 64, true});
  EXPECT_EQ(values_of<uint8_t>(h.data), values_of<uint8_t>(fx.at("dq_hash.packed")));
  EXPECT_EQ(values_of<uint8_t>(h.absmax), values_of<uint8_t>(fx.at("dq_hash.qabsmax")));
  EXPECT_EQ(bits_of(h.nested.absmax), bits_of(fx.at("dq_hash.absmax2")));
  EXPECT_EQ(h.nested.offset, fx.at("dq_hash.offset").to_vector<float>()[0]);
}

TEST(FourBit, DoubleQuantOffsetIsTorchMean) {
  const auto fx = load_fixture("torch_mean.safetensors");
  for (int64_t n : {1,   3,   7,   8,   9,    31,   32,   33,    63,    64,   65,
                    100, 255, 256, 257, 1000, 1024, 4097, 12288, 36864, 70000}) {
    const auto x = hash_floats(n, static_cast<uint64_t>(n));
    const float want = fx.at("mean." + std::to_string(n)).to_vector<float>()[0];
    const float got = detail::torch_mean_f32(x.data(), n);
    EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
        << "n=" << n << " sum " << detail::torch_sum_f32(x.data(), n);
  }
}

TEST(FourBit, StoredBytesAndAllocatorAccounting) {
  const Tensor w = mantissa::rand({512, 256});
  const int64_t n = w.numel();
  const int64_t before = memory_allocated();
  {
    const QuantizedTensor q = quantize_4bit(w, {FormatId::kNf4, 64, false});
    EXPECT_EQ(q.stored_bytes(), n / 2 + 4 * (n / 64));
    EXPECT_DOUBLE_EQ(q.stored_bits_per_element(), 4.5);
    EXPECT_EQ(memory_allocated() - before, q.total_bytes());
  }
  EXPECT_EQ(memory_allocated(), before);
  const QuantizedTensor dq = quantize_4bit(w, {FormatId::kNf4, 64, true});
  // 4 bits + one uint8 per 64 + one fp32 per 64 * 256 + the fp32 offset.
  EXPECT_EQ(dq.stored_bytes(), n / 2 + n / 64 + 4 * ((n / 64 + 255) / 256) + 4);
  EXPECT_NEAR(dq.stored_bits_per_element(), 4.127, 0.002);
  // The offset is a float in the struct, not an allocation.
  EXPECT_EQ(memory_allocated() - before, dq.total_bytes() - 4);
}

TEST(FourBit, RejectsBadArguments) {
  EXPECT_THROW(quantize_4bit(ones({64}), {FormatId::kNf4, 48, false}), Error);
  EXPECT_THROW(quantize_4bit(ones({64}, kInt32)), Error);
  EXPECT_THROW(quantize_4bit(ones({64}), {FormatId::kInt8Rowwise, 64, false}), Error);
  EXPECT_THROW(formats::format_row(std::string_view("nf3")), Error);
}

}  // namespace
}  // namespace mantissa::quant
