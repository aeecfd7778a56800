// The AVX2 GEMM with low-bit operands decoded while packed (kernels/cpu/gemm/gemm_lowbit.h):
//  - the packers turn FP8 codes (all 256 of each format) and NF4/FP4 nibbles into exactly the
//    fp32 values fp8::dequantize / quant::dequantize produce, in both panel layouts, at odd
//    counts and K;
//  - fp8_gemm on that path equals the native fp32 GEMM of the dequantised codes (same kernel,
//    same FMA order) followed by the documented epilogue, bit for bit, in every transpose
//    combination, with and without bias, for f32 and bf16 outputs;
//  - Linear4bit's forward and input gradient equal dequantize-then-native-GEMM bit for bit, at
//    shapes where blocks straddle weight rows, nibbles start mid-byte and B is chunked;
//  - the 4-bit forward allocates no dequantised weight (counting allocator).
// Everything here needs SIMD level avx2 and skips elsewhere (the AVX-512 path is untouched).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/fp8/fp8_cast.h"
#include "kernels/cpu/gemm/gemm_avx2_impl.h"
#include "kernels/cpu/gemm/gemm_backend.h"
#include "kernels/cpu/gemm/gemm_lowbit.h"
#include "kernels/cpu/quant/four_bit_gemv.h"
#include "kernels/cpu/quant/four_bit_tables.h"
#include "mantissa/core/allocator.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/generator.h"
#include "mantissa/formats/format_table.h"
#include "mantissa/fp8/tensor.h"
#include "mantissa/gemm/gemm.h"
#include "mantissa/mantissa.h"
#include "mantissa/quant/linear4bit.h"
#include "mantissa/quant/quantize.h"

namespace mantissa {
namespace {

// a @ b (+ bias) at full precision through the GEMM entry point.
Tensor exact_product(const Tensor& a, const Tensor& b, const Tensor& bias = Tensor()) {
  gemm::Epilogue e;
  e.bias = bias;
  e.float32 = gemm::Float32Products::kExact;
  return gemm::gemm(gemm::dense(a), gemm::dense(b), e);
}

namespace ga = kernels::gemm_avx2;

#define SKIP_WITHOUT_LOWBIT_PATH()                                                 \
  if (!kernels::gemm_native_lowbit_supported())                                    \
  GTEST_SKIP() << "the low-bit GEMM runs only at SIMD level avx2 (this CPU is at " \
               << simd_level_name(simd_level()) << "; MANTISSA_DISABLE_SIMD=avx512f lowers it)"

// Runs a test body under one GEMM backend and restores the previous one.
struct BackendScope {
  kernels::GemmBackend saved = kernels::gemm_backend();
  explicit BackendScope(kernels::GemmBackend b) { kernels::set_gemm_backend(b); }
  ~BackendScope() { kernels::set_gemm_backend(saved); }
};

bool same_bits(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) ||
         (std::isnan(a) && std::isnan(b));
}

void expect_same_bits(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.dtype(), want.dtype());
  const auto g = got.to(kFloat32).to_vector<float>(), w = want.to(kFloat32).to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_TRUE(same_bits(g[i], w[i])) << "element " << i << ": " << g[i] << " vs " << w[i];
}

// ---- packing ----

TEST(GemmLowbitPack, Fp8CodesDecodeToTheTableInBothLayouts) {
  // The packers are AVX2 code: they run wherever the CPU has AVX2, whatever the level.
  if (simd_level() < SimdLevel::kAvx2) GTEST_SKIP() << "needs AVX2";
  for (DType fmt : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    const float* table = kernels::fp8::detail::decode_table(fmt);
    // 16 panel columns x 37 k: every code appears, with odd K and a partial last column set.
    const int64_t K = 37;
    for (int count : {16, 13, 5}) {
      std::vector<uint8_t> by_k(K * 16), by_p(16 * K);  // contiguous along panel / along k
      for (int64_t k = 0; k < K; ++k)
        for (int p = 0; p < 16; ++p) {
          const auto code = static_cast<uint8_t>((k * 16 + p) * 7 + 3);
          by_k[k * 16 + p] = code;
          by_p[p * K + k] = code;
        }
      std::vector<float> d1(K * ga::kNR), d2(K * ga::kNR);
      ga::pack_b(fmt, by_k.data(), 1, 16, count, K, d1.data());
      ga::pack_b(fmt, by_p.data(), K, 1, count, K, d2.data());
      for (int64_t k = 0; k < K; ++k)
        for (int p = 0; p < ga::kNR; ++p) {
          const float want = p < count ? table[by_k[k * 16 + p]] : 0.0f;
          ASSERT_TRUE(same_bits(d1[k * ga::kNR + p], want)) << fmt.name() << " k" << k << " p" << p;
          ASSERT_TRUE(same_bits(d2[k * ga::kNR + p], want)) << fmt.name() << " k" << k << " p" << p;
        }
    }
    // A panels (6 wide) too: rows contiguous along k (an activation), and rows adjacent in
    // memory (a transposed view such as the weight gradient's dy^T, whose k rows are decoded six
    // or four codes at a time), every code in every lane, full and partial panels.
    std::vector<uint8_t> a(6 * 256);
    for (int i = 0; i < 6 * 256; ++i) a[i] = static_cast<uint8_t>(i);
    std::vector<float> pa(256 * ga::kMR);
    ga::pack_a(fmt, a.data(), 256, 1, 6, 256, pa.data());
    for (int k = 0; k < 256; ++k)
      for (int p = 0; p < 6; ++p)
        ASSERT_TRUE(same_bits(pa[k * ga::kMR + p], table[a[p * 256 + k]]));
    for (int count : {6, 5, 4, 3, 1}) {
      // Element (p, k) at k * 7 + p: k rows 7 codes apart, each code in each lane over K = 256.
      std::vector<uint8_t> t(256 * 7);
      for (int k = 0; k < 256; ++k)
        for (int p = 0; p < 7; ++p) t[k * 7 + p] = static_cast<uint8_t>(k * 37 + p * 51);
      std::vector<float> pt(256 * ga::kMR, -1.0f);
      ga::pack_a(fmt, t.data(), 1, 7, count, 256, pt.data());
      for (int k = 0; k < 256; ++k)
        for (int p = 0; p < ga::kMR; ++p) {
          const float want = p < count ? table[t[k * 7 + p]] : 0.0f;
          ASSERT_TRUE(same_bits(pt[k * ga::kMR + p], want))
              << fmt.name() << " count " << count << " k" << k << " p" << p;
        }
    }
  }
}

TEST(GemmLowbitPack, FourBitDecodesToDequantizeInBothLayouts) {
  SKIP_WITHOUT_LOWBIT_PATH();
  Generator gen(11);
  // 23 rows of 101: blocks of 64 straddle rows and odd rows start mid-byte.
  const int64_t rows = 23, cols = 101;
  const Tensor w = randn({rows, cols}, kFloat32, &gen);
  for (FormatId f : {FormatId::kNf4, FormatId::kFp4}) {
    const QuantizedTensor q = quant::quantize_4bit(w, {f, 64, true});
    const Tensor absmax = quant::block_absmax(q);
    for (DType cd : {kFloat32, kBFloat16, kFloat16}) {
      const auto want = quant::dequantize(q, cd).to(kFloat32).to_vector<float>();
      kernels::GemmFourBit fb;
      fb.packed = q.data.data<uint8_t>();
      fb.absmax = absmax.data<float>();
      fb.table = kernels::quant::four_bit_codebook(f).dequant_values.data();
      fb.round_to = cd;
      // Forward layout: panel columns are weight rows (contiguous along k = cols).
      for (int64_t r0 : {int64_t{0}, int64_t{16}}) {
        const int count = static_cast<int>(std::min<int64_t>(16, rows - r0));
        for (int64_t k0 : {int64_t{0}, int64_t{5}}) {
          const int64_t K = cols - k0;
          std::vector<float> d(K * ga::kNR);
          ga::pack_b_four_bit(fb, r0 * cols + k0, cols, 1, count, K, d.data());
          for (int64_t k = 0; k < K; ++k)
            for (int p = 0; p < ga::kNR; ++p) {
              const float e = p < count ? want[(r0 + p) * cols + k0 + k] : 0.0f;
              ASSERT_TRUE(same_bits(d[k * ga::kNR + p], e)) << cd.name() << " k" << k << " p" << p;
            }
        }
      }
      // Input-gradient layout: k rows are weight rows, panel columns contiguous.
      for (int64_t c0 : {int64_t{0}, int64_t{16}, int64_t{96}}) {
        const int count = static_cast<int>(std::min<int64_t>(16, cols - c0));
        std::vector<float> d(rows * ga::kNR);
        ga::pack_b_four_bit(fb, c0, 1, cols, count, rows, d.data());
        for (int64_t k = 0; k < rows; ++k)
          for (int p = 0; p < ga::kNR; ++p) {
            const float e = p < count ? want[k * cols + c0 + p] : 0.0f;
            ASSERT_TRUE(same_bits(d[k * ga::kNR + p], e)) << cd.name() << " k" << k << " p" << p;
          }
      }
    }
  }
}

// ---- FP8 GEMM ----

Tensor random_tensor(const Shape& shape, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(numel_of(shape)));
  for (auto& x : v) x = nd(rng);
  return tensor(v, shape);
}

// The native fp32 GEMM of the dequantised codes, then (acc * alpha) + bias, rounded once.
Tensor fp8_reference(const fp8::Fp8Tensor& a, bool ta, const fp8::Fp8Tensor& b, bool tb,
                     const Tensor& bias, DType out) {
  BackendScope native(kernels::GemmBackend::kNative);
  Tensor a32 = fp8::dequantize({a.data, 1.0f}), b32 = fp8::dequantize({b.data, 1.0f});
  if (ta) a32 = a32.t();
  if (tb) b32 = b32.t();
  const Tensor acc = exact_product(a32, b32);
  const float alpha = a.scale_inv * b.scale_inv;
  std::vector<float> v = acc.to_vector<float>();
  const int64_t n = acc.size(1);
  const std::vector<float> bv =
      bias.defined() ? bias.to(kFloat32).to_vector<float>() : std::vector<float>();
  for (size_t i = 0; i < v.size(); ++i) {
    const float s = v[i] * alpha;
    v[i] = bias.defined() ? s + bv[i % n] : s;
  }
  return tensor(v, acc.shape()).to(out);
}

TEST(GemmLowbitFp8, EqualsNativeGemmOfDequantisedCodesBitForBit) {
  SKIP_WITHOUT_LOWBIT_PATH();
  BackendScope automatic(kernels::GemmBackend::kAuto);
  uint32_t seed = 20;
  // m, n edges around the 6x16 tile; k around 8, 64, the 256-deep K block.
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 17, 9}, {13, 33, 65}, {37, 29, 300}, {70, 300, 257}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const Shape sa = ta ? Shape{k, m} : Shape{m, k}, sb = tb ? Shape{n, k} : Shape{k, n};
        const auto a = fp8::quantize(random_tensor(sa, 3.0f, seed++), kFloat8_e4m3fn, 30.0f);
        const auto b = fp8::quantize(random_tensor(sb, 0.05f, seed++), kFloat8_e5m2, 5000.0f);
        const Tensor bias = random_tensor({n}, 1.0f, seed++).to(kBFloat16);
        for (DType out : {kFloat32, kBFloat16}) {
          SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k << " ta=" << ta
                                            << " tb=" << tb << " " << out.name());
          expect_same_bits(fp8::fp8_gemm(a.q, ta, b.q, tb, bias, out),
                           fp8_reference(a.q, ta, b.q, tb, bias, out));
          expect_same_bits(fp8::fp8_gemm(a.q, ta, b.q, tb, Tensor(), out),
                           fp8_reference(a.q, ta, b.q, tb, Tensor(), out));
        }
      }
    }
  }
}

TEST(GemmLowbitFp8, MatchesFp64ReferenceOfDequantisedOperandsAtLinearShapes) {
  SKIP_WITHOUT_LOWBIT_PATH();
  // The three products of a Linear (forward, dgrad with W as it is, wgrad with dy transposed)
  // at an odd shape: rows 70, in 100, out 45.
  const int64_t rows = 70, in = 100, out = 45;
  const auto x = fp8::quantize(random_tensor({rows, in}, 2.0f, 1), kFloat8_e4m3fn, 100.0f);
  const auto w = fp8::quantize(random_tensor({out, in}, 0.1f, 2), kFloat8_e4m3fn, 2000.0f);
  const auto dy = fp8::quantize(random_tensor({rows, out}, 0.01f, 3), kFloat8_e5m2, 3e4f);
  struct Case {
    const fp8::Fp8Tensor *a, *b;
    bool ta, tb;
  };
  for (const Case& c : {Case{&x.q, &w.q, false, true}, Case{&dy.q, &w.q, false, false},
                        Case{&dy.q, &x.q, true, false}}) {
    const Tensor y = fp8::fp8_gemm(*c.a, c.ta, *c.b, c.tb);
    Tensor da = fp8::dequantize(*c.a).to(kFloat64), db = fp8::dequantize(*c.b).to(kFloat64);
    if (c.ta) da = da.t();
    if (c.tb) db = db.t();
    const auto ref = exact_product(da, db).to_vector<double>();
    const auto mag = exact_product(abs(da), abs(db)).to_vector<double>();
    const auto got = y.to_vector<float>();
    const int64_t k = da.size(1);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], (k + 4) * std::ldexp(1.0, -24) * mag[i] + 1e-30) << i;
  }
}

// ---- 4-bit Linear ----

TEST(GemmLowbitLinear4bit, ForwardAndInputGradientEqualDequantizeThenGemm) {
  SKIP_WITHOUT_LOWBIT_PATH();
  BackendScope automatic(kernels::GemmBackend::kAuto);
  Generator gen(5);
  // (rows, in, out): blocks straddle rows (in 100, 99), odd rows start mid-byte (99), M and N
  // edges, and a weight large enough that B is packed in several chunks (in 1030, out 600).
  // Forwards of at most kFourBitGemvMaxRows rows take another kernel (test_four_bit_gemv.cpp),
  // so the fewest rows here are one more.
  const int64_t few = kernels::quant::kFourBitGemvMaxRows + 1;
  const int64_t shapes[][3] = {{few, 64, 16}, {67, 100, 37}, {64, 99, 45}, {70, 1030, 600}};
  for (const auto& s : shapes) {
    const int64_t rows = s[0], in = s[1], out = s[2];
    nn::Linear lin(in, out, true, kFloat32, &gen);
    for (FormatId f : {FormatId::kNf4, FormatId::kFp4}) {
      for (DType cd : {kBFloat16, kFloat16, kFloat32}) {
        SCOPED_TRACE(::testing::Message() << rows << "x" << in << "->" << out << " "
                                          << formats::format_name(f) << " " << cd.name());
        const QuantizedTensor q = quant::quantize_4bit(lin.weight, {f, 64, true});
        const Tensor x = randn({rows, in}, kFloat32, &gen).to(cd);
        const Tensor g = randn({rows, out}, kFloat32, &gen).to(cd);
        const Tensor bias = lin.bias.detach().to(cd);
        Tensor xr = x.detach().clone();
        xr.set_requires_grad(true);
        const Tensor y = quant::linear_4bit(xr, q, bias);
        y.backward(g);
        BackendScope native(kernels::GemmBackend::kNative);
        const Tensor wd = quant::dequantize(q, cd);
        expect_same_bits(y.detach(), exact_product(x, wd.t(), bias));
        expect_same_bits(xr.grad(), exact_product(g, wd));
      }
    }
  }
}

TEST(GemmLowbitLinear4bit, ForwardAllocatesNoDequantisedWeight) {
  SKIP_WITHOUT_LOWBIT_PATH();
  BackendScope automatic(kernels::GemmBackend::kAuto);
  Generator gen(7);
  const int64_t n = 1024;
  quant::Linear4bit layer(n, n, true, {FormatId::kNf4, true, kBFloat16, 64}, &gen);
  const Tensor x = randn({64, n}, kFloat32, &gen).to(kBFloat16);
  layer.forward(x);  // warm the GEMM's thread-local panels
  const int64_t before = memory_allocated();
  reset_peak_memory_stats();
  const Tensor y = layer.forward(x);
  const int64_t peak = max_memory_allocated() - before;
  // The output (64 x 1024 bf16 = 128 KiB) and the small per-block absmax; a dequantised bf16
  // weight alone would be 2 MiB.
  EXPECT_LT(peak, 64 * n * 2 + 256 * 1024) << "peak " << peak << " bytes";
}

}  // namespace
}  // namespace mantissa
