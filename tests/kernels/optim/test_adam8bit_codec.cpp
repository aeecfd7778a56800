// The gather-free codec of the 8-bit Adam kernels (kernels/cpu/optim/dynamic_map_codec.h): its
// closed forms reproduce bitsandbytes' dynamic maps bit for bit, and the AVX2 and AVX-512
// encoders and decoders give exactly the scalar kernel's codes and values for every kind of input.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/optim/adam8bit_kernels.h"
#include "kernels/cpu/optim/dynamic_map_codec.h"
#include "kernels/cpu/quant/blockwise_dynamic.h"
#include "mantissa/core/cpu_features.h"

namespace mantissa {
namespace {

namespace ko = mantissa::kernels::optim;
namespace kq = mantissa::kernels::quant;

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

// The SIMD kernels this CPU can run (AVX2, and AVX-512 where present), each checked against
// the scalar one.
struct SimdKernels {
  const char* name;
  decltype(&ko::adam8bit_encode_avx2) encode;
  decltype(&ko::adam8bit_decode_avx512) decode;  // null: the level decodes by table reads
  decltype(&ko::adam8bit_block_avx2) block;
  decltype(&ko::adam8bit_blocks_avx2) blocks;
};

std::vector<SimdKernels> simd_kernels() {
  std::vector<SimdKernels> k;
  if (simd_level() >= SimdLevel::kAvx2)
    k.push_back({"avx2", ko::adam8bit_encode_avx2, nullptr, ko::adam8bit_block_avx2,
                 ko::adam8bit_blocks_avx2});
  if (simd_level() >= SimdLevel::kAvx512)
    k.push_back({"avx512", ko::adam8bit_encode_avx512, ko::adam8bit_decode_avx512,
                 ko::adam8bit_block_avx512, ko::adam8bit_blocks_avx512});
  // The byte-plane table decode; without VBMI it is reported as skipped below.
  if (simd_level() >= SimdLevel::kAvx512 && cpu_features().avx512_vbmi)
    k.push_back({"avx512_vbmi", ko::adam8bit_encode_avx512, ko::adam8bit_decode_avx512_vbmi,
                 ko::adam8bit_block_avx512_vbmi, ko::adam8bit_blocks_avx512_vbmi});
  return k;
}

#define SKIP_WITHOUT_SIMD() \
  if (simd_kernels().empty()) GTEST_SKIP() << "no AVX2 on this CPU"

// SIMD codes == scalar codes for values * inv, both moments, at every SIMD level.
void expect_same_codes(const std::vector<float>& values, float inv, const char* what) {
  const ko::Adam8bitMaps& maps = ko::dynamic_adam8bit_maps();
  const int64_t n = static_cast<int64_t>(values.size());
  for (const SimdKernels& k : simd_kernels()) {
    for (bool first : {true, false}) {
      std::vector<uint8_t> fast(values.size()), exact(values.size());
      k.encode(maps, first, values.data(), inv, fast.data(), n);
      ko::adam8bit_encode_scalar(maps, first, values.data(), inv, exact.data(), n);
      int bad = 0;
      for (int64_t i = 0; i < n; ++i)
        if (fast[i] != exact[i] && ++bad <= 5)
          ADD_FAILURE() << what << (first ? " m" : " v") << " x=" << values[i] << " (bits 0x"
                        << std::hex << bits(values[i]) << std::dec << ") inv=" << inv << ": "
                        << k.name << " " << int(fast[i]) << ", scalar " << int(exact[i]);
      EXPECT_EQ(bad, 0) << what << " " << k.name;
    }
  }
}

TEST(Adam8bitCodec, BuiltInMapsHaveExactClosedForms) {
  EXPECT_TRUE(ko::dynamic_codec_signed().exact);
  EXPECT_TRUE(ko::dynamic_codec_unsigned().exact);
  EXPECT_TRUE(ko::dynamic_codec_signed().is_signed);
  EXPECT_FALSE(ko::dynamic_codec_unsigned().is_signed);
}

TEST(Adam8bitCodec, ModelDecodesEveryCodeToTheMapsBits) {
  for (bool is_signed : {true, false}) {
    const float* code = is_signed ? kq::dynamic_map_signed() : kq::dynamic_map_unsigned();
    const ko::DynamicMapCodec& c =
        is_signed ? ko::dynamic_codec_signed() : ko::dynamic_codec_unsigned();
    for (int q = 0; q < 256; ++q)
      ASSERT_EQ(bits(c.decode(static_cast<uint8_t>(q))), bits(code[q])) << is_signed << " " << q;
  }
}

TEST(Adam8bitCodec, ACorruptedMapIsNotExact) {
  std::vector<float> code(kq::dynamic_map_unsigned(), kq::dynamic_map_unsigned() + 256);
  code[100] = std::nextafter(code[100], 1.0f);  // one ulp off torch's value
  ko::DynamicMapCodec c;
  c.build(code.data(), false);
  EXPECT_FALSE(c.exact);
  std::vector<float> uniform(256);
  for (int i = 0; i < 256; ++i) uniform[i] = i / 255.0f;
  c.build(uniform.data(), false);
  EXPECT_FALSE(c.exact);
}

TEST(Adam8bitCodec, SimdDecodesEveryCode) {
  if (simd_level() < SimdLevel::kAvx512)
    GTEST_SKIP() << "no AVX-512 on this CPU (the AVX2 kernel decodes by table reads)";
  const ko::Adam8bitMaps& maps = ko::dynamic_adam8bit_maps();
  std::vector<uint8_t> q(256 + 13);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint8_t>((i * 7 + 3) % 256);
  for (int i = 0; i < 256; ++i) q[i] = static_cast<uint8_t>(i);
  for (const SimdKernels& k : simd_kernels()) {
    if (k.decode == nullptr) continue;
    for (bool first : {true, false}) {
      const float* code = first ? maps.code1 : maps.code2;
      // Every length up to the whole buffer from an odd start (the table decode's tails), and
      // nothing written past the end.
      for (int64_t n : {1, 15, 16, 17, 63, 64, 65, 200, 268}) {
        std::vector<float> out(q.size(), -7.0f);
        k.decode(maps, first, q.data() + 1, out.data(), n);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(bits(out[i]), bits(code[q[i + 1]])) << k.name << " " << first << " " << i;
        for (size_t i = n; i < out.size(); ++i) ASSERT_EQ(out[i], -7.0f) << k.name << " " << n;
      }
      std::vector<float> out(q.size());
      k.decode(maps, first, q.data(), out.data(), static_cast<int64_t>(q.size()));
      for (size_t i = 0; i < q.size(); ++i)
        ASSERT_EQ(bits(out[i]), bits(code[q[i]])) << k.name << " " << first << " " << i;
    }
  }
}

TEST(Adam8bitCodec, BytePlanesHoldEveryEntrysBytes) {
  const ko::Adam8bitMaps& maps = ko::dynamic_adam8bit_maps();
  for (const auto& [code, planes] :
       {std::pair{maps.code1, maps.planes1}, std::pair{maps.code2, maps.planes2}})
    for (int i = 0; i < 256; ++i) {
      const uint32_t b = bits(code[i]);
      EXPECT_EQ(planes->plane[0][i] | planes->plane[1][i] << 8 | planes->plane[2][i] << 16 |
                    static_cast<uint32_t>(planes->plane[3][i]) << 24,
                b)
          << i;
    }
  if (simd_level() >= SimdLevel::kAvx512 && !cpu_features().avx512_vbmi)
    GTEST_SKIP() << "no AVX-512 VBMI on this CPU: its table decode was not run";
}

TEST(Adam8bitCodec, WordPlanesHoldEveryEntrysWords) {
  const ko::Adam8bitMaps& maps = ko::dynamic_adam8bit_maps();
  for (const auto& [code, words] :
       {std::pair{maps.code1, maps.words1}, std::pair{maps.code2, maps.words2}})
    for (int i = 0; i < 256; ++i)
      EXPECT_EQ(words->lo[i] | static_cast<uint32_t>(words->hi[i]) << 16, bits(code[i])) << i;
}

// Every midpoint of both maps, its float neighbours and the map entries themselves, of both
// signs, unscaled and through scales that make x * inv land on them.
TEST(Adam8bitCodec, SimdEncodesMidpointsAndNeighboursExactly) {
  SKIP_WITHOUT_SIMD();
  std::vector<float> xs;
  for (const float* code : {kq::dynamic_map_signed(), kq::dynamic_map_unsigned()}) {
    for (int i = 0; i < 256; ++i) {
      const float entry = code[i];
      const float mid = i < 255 ? 0.5f * (code[i] + code[i + 1]) : 1.0f;
      for (float center : {mid, entry}) {
        for (int d = -4; d <= 4; ++d) {
          const float x = from_bits(bits(std::fabs(center)) + static_cast<uint32_t>(d));
          xs.push_back(x);
          xs.push_back(-x);
        }
      }
    }
  }
  expect_same_codes(xs, 1.0f, "midpoints");
  // The same values as m / absmax with absmax = 0.75 and 3e-5 (x = m * (1 / absmax)).
  for (float absmax : {0.75f, 3e-5f}) {
    std::vector<float> ms(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) ms[i] = xs[i] * absmax;
    expect_same_codes(ms, 1.0f / absmax, "scaled midpoints");
  }
}

TEST(Adam8bitCodec, SimdEncodesEdgeValuesExactly) {
  SKIP_WITHOUT_SIMD();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           1.0f,
                           -1.0f,
                           std::nextafter(1.0f, 2.0f),
                           -std::nextafter(1.0f, 2.0f),
                           2.0f,
                           -3.0f,
                           1e-45f,
                           -1e-45f,
                           1e-38f,
                           -1e-38f,
                           1e-30f,
                           -1e-30f,
                           std::numeric_limits<float>::max(),
                           -std::numeric_limits<float>::max(),
                           inf,
                           -inf,
                           nan,
                           -nan};
  for (float inv : {1.0f, 0.5f, 1e30f, inf}) expect_same_codes(xs, inv, "edge values");
}

// A sweep of float bit patterns (every 251st, all signs and exponents, NaNs included).
TEST(Adam8bitCodec, SimdEncodesASweepOfAllFloatsExactly) {
  SKIP_WITHOUT_SIMD();
  std::vector<float> xs;
  xs.reserve((1ull << 32) / 251 + 1);
  for (uint64_t b = 0; b < (1ull << 32); b += 251)
    xs.push_back(from_bits(static_cast<uint32_t>(b)));
  expect_same_codes(xs, 1.0f, "sweep");
}

// The scalar model itself (what build()'s checks rest on): wherever it decides a value, its index
// is the exact encoder's, on every 251st float32 bit pattern and on the midpoints of both maps
// with their float neighbours (the undecided ones are counted by the test below).
TEST(Adam8bitCodec, ModelAgreesWithTheExactEncoderWhereItDecides) {
  const ko::Adam8bitMaps& maps = ko::dynamic_adam8bit_maps();
  std::vector<float> xs;
  for (uint64_t b = 0; b < (1ull << 32); b += 251)
    xs.push_back(from_bits(static_cast<uint32_t>(b)));
  for (bool is_signed : {true, false}) {
    const float* code = is_signed ? kq::dynamic_map_signed() : kq::dynamic_map_unsigned();
    for (int i = 0; i + 1 < 256; ++i) {
      float m = 0.5f * (code[i] + code[i + 1]);
      for (int k = 0; k < 4; ++k) m = std::nextafter(m, -2.0f);
      for (int k = 0; k < 9; ++k, m = std::nextafter(m, 2.0f)) xs.push_back(m);
    }
  }
  const int64_t n = static_cast<int64_t>(xs.size());
  for (bool is_signed : {true, false}) {
    const ko::DynamicMapCodec& c =
        is_signed ? ko::dynamic_codec_signed() : ko::dynamic_codec_unsigned();
    std::vector<uint8_t> exact(xs.size());
    ko::adam8bit_encode_scalar(maps, is_signed, xs.data(), 1.0f, exact.data(), n);
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      int q;
      if (c.encode_fast(xs[i], &q) && q != exact[i] && ++bad <= 5)
        ADD_FAILURE() << is_signed << " bits 0x" << std::hex << bits(xs[i]) << std::dec
                      << ": model " << q << ", exact " << int(exact[i]);
    }
    EXPECT_EQ(bad, 0) << is_signed;
  }
}

// The exact path is for the rare lane near a midpoint: Adam-like moments scaled by their
// block's absmax take it for well under 1% of the values.
TEST(Adam8bitCodec, FastPathDecidesAlmostEveryValue) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (bool is_signed : {true, false}) {
    const ko::DynamicMapCodec& c =
        is_signed ? ko::dynamic_codec_signed() : ko::dynamic_codec_unsigned();
    int64_t exact_path = 0, total = 0;
    for (int block = 0; block < 400; ++block) {
      float x[256], amax = 0.0f;
      for (float& v : x) {
        v = normal(rng) * 1e-3f;
        if (!is_signed) v = v * v;
        amax = std::max(amax, std::fabs(v));
      }
      const float inv = 1.0f / amax;
      for (float v : x) {
        int q;
        exact_path += c.encode_fast(v * inv, &q) ? 0 : 1;
        ++total;
      }
    }
    EXPECT_LT(static_cast<double>(exact_path) / total, 0.01) << is_signed;
  }
}

TEST(Adam8bitCodec, NonFiniteScanFindsEveryPosition) {
  const ko::AnyNonFiniteFn scan = ko::any_non_finite_kernel(simd_level());
  for (int64_t n : {1, 7, 8, 31, 32, 33, 100, 256}) {
    std::vector<float> g(static_cast<size_t>(n), 0.5f);
    EXPECT_FALSE(scan(g.data(), n));
    EXPECT_FALSE(ko::any_non_finite_scalar(g.data(), n));
    g[0] = std::numeric_limits<float>::max();
    EXPECT_FALSE(scan(g.data(), n));
    for (float bad :
         {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
          std::numeric_limits<float>::quiet_NaN()}) {
      for (int64_t i = 0; i < n; ++i) {
        const float keep = g[i];
        g[i] = bad;
        ASSERT_TRUE(scan(g.data(), n)) << n << " " << i;
        ASSERT_TRUE(ko::any_non_finite_scalar(g.data(), n)) << n << " " << i;
        g[i] = keep;
      }
    }
  }
}

// The whole fused block: every code of both maps decoded, updated and re-encoded, AVX2 against
// scalar, with blocks whose new absmax comes from a negative and from a positive moment.
TEST(Adam8bitCodec, SimdBlockKernelEqualsScalarOverEveryCode) {
  SKIP_WITHOUT_SIMD();
  const ko::Adam8bitMaps& maps = ko::dynamic_adam8bit_maps();
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t n = trial % 4 == 3 ? 251 : 256;
    std::vector<float> p(n), g(n);
    std::vector<uint8_t> q1(n), q2(n);
    for (int64_t i = 0; i < n; ++i) {
      p[i] = normal(rng);
      g[i] = normal(rng) * (trial % 3 == 0 ? 1e-6f : 1e-2f) * (i == trial ? -50.0f : 1.0f);
      q1[i] = static_cast<uint8_t>((i + trial) % 256);
      q2[i] = static_cast<uint8_t>((255 - i + 3 * trial) % 256);
    }
    float a1 = 0.01f * (trial + 1), a2 = 1e-5f * (trial + 1);
    ko::Adam8bitScalars s{0.9f, 0.1f, 0.999f, 0.001f, -1e-3f, 1e-8f, 0.999f, trial % 2 == 0};
    const auto p0 = p;
    const auto q10 = q1, q20 = q2;
    const float a10 = a1, a20 = a2;
    ko::adam8bit_block_scalar(s, maps, p.data(), g.data(), q1.data(), q2.data(), &a1, &a2, n);
    for (const SimdKernels& k : simd_kernels()) {
      auto p2 = p0;
      auto q1b = q10, q2b = q20;
      float a1b = a10, a2b = a20;
      k.block(s, maps, p2.data(), g.data(), q1b.data(), q2b.data(), &a1b, &a2b, n);
      ASSERT_EQ(bits(a1), bits(a1b)) << k.name;
      ASSERT_EQ(bits(a2), bits(a2b)) << k.name;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(bits(p[i]), bits(p2[i])) << k.name << " " << trial << " " << i;
        ASSERT_EQ(q1[i], q1b[i]) << k.name << " " << trial << " " << i;
        ASSERT_EQ(q2[i], q2b[i]) << k.name << " " << trial << " " << i;
      }
    }
  }
}

// Runs `steps` steps of the block kernels over p0 with gradient g (state starting at zero),
// scalar and every SIMD level, and checks each level's parameters, codes and absmax are the
// scalar kernel's bits; returns the scalar absmax of the first moment.
std::vector<float> expect_blocks_equal_scalar(const std::vector<float>& p0,
                                              const std::vector<float>& g, int steps) {
  const ko::Adam8bitMaps& maps = ko::dynamic_adam8bit_maps();
  const int64_t n = static_cast<int64_t>(p0.size()), blocks = (n + 255) / 256;
  const ko::Adam8bitScalars s{0.9f, 0.1f, 0.999f, 0.001f, -1e-3f, 1e-8f, 0.999f, true};
  auto run = [&](auto kernel, std::vector<float>& p, std::vector<uint8_t>& q1,
                 std::vector<uint8_t>& q2, std::vector<float>& a1, std::vector<float>& a2) {
    p = p0;
    q1.assign(n, 127);
    q2.assign(n, 0);
    a1.assign(blocks, 0.0f);
    a2.assign(blocks, 0.0f);
    for (int step = 0; step < steps; ++step)
      kernel(s, maps, p.data(), g.data(), q1.data(), q2.data(), a1.data(), a2.data(), n);
  };
  std::vector<float> p, a1, a2;
  std::vector<uint8_t> q1, q2;
  run(ko::adam8bit_blocks_scalar, p, q1, q2, a1, a2);
  for (const SimdKernels& k : simd_kernels()) {
    std::vector<float> pb, a1b, a2b;
    std::vector<uint8_t> q1b, q2b;
    run(k.blocks, pb, q1b, q2b, a1b, a2b);
    for (int64_t b = 0; b < blocks; ++b) {
      EXPECT_EQ(bits(a1[b]), bits(a1b[b])) << k.name << " block " << b;
      EXPECT_EQ(bits(a2[b]), bits(a2b[b])) << k.name << " block " << b;
    }
    int bad = 0;
    for (int64_t i = 0; i < n; ++i)
      if ((bits(p[i]) != bits(pb[i]) || q1[i] != q1b[i] || q2[i] != q2b[i]) && ++bad <= 5)
        ADD_FAILURE() << k.name << " element " << i << ": p " << p[i] << " / " << pb[i] << ", q1 "
                      << int(q1[i]) << " / " << int(q1b[i]) << ", q2 " << int(q2[i]) << " / "
                      << int(q2b[i]);
    EXPECT_EQ(bad, 0) << k.name;
  }
  return a1;
}

// Several blocks in one call (the optimizer hands each thread a run of blocks), the last one
// partial, one of them all zero.
TEST(Adam8bitCodec, SimdMultiBlockKernelEqualsScalar) {
  SKIP_WITHOUT_SIMD();
  const int64_t n = 5 * 256 + 77;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> p(n), g(n);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = normal(rng);
    g[i] = i / 256 == 2 ? 0.0f : normal(rng) * 1e-3f;
  }
  EXPECT_EQ(expect_blocks_equal_scalar(p, g, 4)[2], 0.0f);
}

// Many blocks, so that the kernels' pipelining (AVX-512: one block's update interleaved with the
// previous block's encoding; AVX2: three blocks in flight) meets every neighbour: gradients from
// 1e-7 to 10 in scale from block to block, signs mixed, an all-zero block between two full ones
// and one of subnormal gradients (its second moment underflows to 0, and its first moment's
// 1 / absmax is infinite: the exact encoder's cases), over five steps.
TEST(Adam8bitCodec, SimdPipelinedBlocksEqualScalarAcrossScales) {
  SKIP_WITHOUT_SIMD();
  const int64_t n = 41 * 256 - 3;
  std::mt19937 rng(23);
  std::normal_distribution<float> normal;
  std::vector<float> p(n), g(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = i / 256;
    p[i] = normal(rng);
    g[i] = b == 17   ? 0.0f
           : b == 29 ? normal(rng) * 1e-39f
                     : normal(rng) * std::pow(10.0f, static_cast<float>(b % 9) - 7.0f);
  }
  EXPECT_EQ(expect_blocks_equal_scalar(p, g, 5)[17], 0.0f);
}

}  // namespace
}  // namespace mantissa
