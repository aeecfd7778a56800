// The AVX2 GEMM's narrow-output kernel (kernels/cpu/gemm/gemm_narrow_avx2.cpp): products with at
// most kAvx2NarrowMaxN columns and A's rows contiguous in k, computed as dot products along k.
// Its bits are pinned down by a scalar model of the documented order: eight lane sums of fused
// multiply-adds over k = l, l + 8, ... (lanes past K adding 0 * 0), reduced as
// ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)), then the scale and the bias, each rounded
// once, then one rounding to the output dtype. Checked for f32, bf16 and f16 operands and
// outputs, B read straight from a weight's rows and through the panel packer (row-major, padded,
// FP8 codes), batches sharing or not sharing B, row and column counts on both sides of the
// kernel's 3 x 4 pass, and 1, 2 and 3 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/cpu/gemm/gemm_backend.h"
#include "kernels/cpu/gemm/gemm_lowbit.h"
#include "kernels/cpu/gemm/gemm_native.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/float8.h"
#include "mantissa/core/half.h"

namespace mantissa {
namespace {

using kernels::GemmArgs;

#define SKIP_WITHOUT_AVX2_PATH()                                                             \
  if (simd_level() != SimdLevel::kAvx2)                                                      \
  GTEST_SKIP() << "the narrow AVX2 kernel runs only at SIMD level avx2 (this CPU is at "     \
               << simd_level_name(simd_level()) << "; MANTISSA_DISABLE_SIMD=avx512f lowers " \
               << "it)"

// bf16 and f16 products take the AVX2 path, narrow kernel included, at the AVX-512 levels too.
#define SKIP_WITHOUT_AVX2_PATH_FOR(dt)                                                \
  if (!kernels::gemm_avx2_path(dt))                                                   \
  GTEST_SKIP() << (dt).name() << " products do not take the AVX2 path at SIMD level " \
               << simd_level_name(simd_level())

// A batch of rows x cols operands in one buffer of `dt` values (f32, bf16 or f16 bits, or FP8
// codes), entry i at offsets[i]; element (r, c) at r * rs + c * cs. Padding holds NaN.
struct Operand {
  DType dt = kFloat32;
  std::vector<unsigned char> bytes;
  int64_t rs = 0, cs = 0;
  std::vector<int64_t> offsets;

  float at(int64_t i, int64_t r, int64_t c) const {
    const int64_t e = offsets[i] + r * rs + c * cs;
    float v = 0;
    convert_buffer(bytes.data() + e * dt.itemsize(), dt, &v, kFloat32, 1);
    return v;
  }
};

// rows x cols per entry, `transposed` storing columns contiguously; `entries` distinct entries
// (or one, repeated `batch` times when shared). Values uniform in [-1, 1) rounded to dt.
Operand make(DType dt, int64_t batch, int64_t rows, int64_t cols, bool transposed, int64_t pad,
             bool shared, std::mt19937& rng) {
  Operand o;
  o.dt = dt;
  const int64_t inner = transposed ? rows : cols, outer = transposed ? cols : rows;
  const int64_t ld = inner + pad, entry = outer * ld, entries = shared ? 1 : batch;
  std::vector<float> v(entries * entry, std::numeric_limits<float>::quiet_NaN());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t e = 0; e < entries; ++e)
    for (int64_t o2 = 0; o2 < outer; ++o2)
      for (int64_t j = 0; j < inner; ++j) v[e * entry + o2 * ld + j] = u(rng);
  o.bytes.resize(v.size() * dt.itemsize());
  convert_buffer(v.data(), kFloat32, o.bytes.data(), dt, static_cast<int64_t>(v.size()));
  o.rs = transposed ? 1 : ld;
  o.cs = transposed ? ld : 1;
  for (int64_t i = 0; i < batch; ++i) o.offsets.push_back(shared ? 0 : i * entry);
  return o;
}

// The documented order for one output.
float model(const Operand& a, const Operand& b, int64_t i, int64_t m, int64_t n, int64_t K,
            const float* bias, bool scale, float alpha) {
  float s[8] = {};
  const int64_t kp = (K + 7) / 8 * 8;
  for (int64_t k = 0; k < kp; ++k) {
    const float x = k < K ? a.at(i, m, k) : 0.0f, y = k < K ? b.at(i, k, n) : 0.0f;
    s[k % 8] = std::fma(x, y, s[k % 8]);
  }
  float v = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  if (scale) v *= alpha;
  if (bias) v += bias[n];
  return v;
}

float output(const std::vector<unsigned char>& c, DType dt, int64_t e) {
  float v = 0;
  convert_buffer(c.data() + e * dt.itemsize(), dt, &v, kFloat32, 1);
  return v;
}

uint32_t bits_of(float v, DType dt) {
  // The model's fp32 value rounded once to the output dtype, as bits.
  uint32_t out = 0;
  convert_buffer(&v, kFloat32, &out, dt, 1);
  return out;
}

struct Case {
  int64_t batch, M, N, K;
  bool b_transposed, shared_b, bias;
  int64_t pad;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  const int64_t ms[] = {1, 2, 3, 4, 5, 7, 40};
  const int64_t ks[] = {1, 7, 8, 9, 31, 128, 300, 1031};
  int i = 0;
  for (int64_t N = 1; N <= kernels::kAvx2NarrowMaxN; ++N) {
    for (int j = 0; j < 3; ++j, ++i) {
      const int64_t M = ms[(i * 3 + j) % 7], K = ks[(i * 5 + j) % 8];
      out.push_back(
          {i % 4 == 3 ? 2 : 1, M, N, K, i % 2 == 0, i % 3 != 0, i % 5 < 3, i % 3 == 1 ? 3 : 0});
    }
  }
  return out;
}

// Runs every case through gemm_native for operand dtype `dt` and output `out` and compares
// each element's bits with the model's.
void check_native(DType dt, DType out, uint32_t seed) {
  std::mt19937 rng(seed);
  for (const Case& c : cases()) {
    SCOPED_TRACE(::testing::Message()
                 << dt.name() << " -> " << out.name() << " batch " << c.batch << " M " << c.M
                 << " N " << c.N << " K " << c.K << " b_t " << c.b_transposed << " shared "
                 << c.shared_b << " bias " << c.bias << " pad " << c.pad);
    const Operand a = make(dt, c.batch, c.M, c.K, false, c.pad, false, rng);
    const Operand b = make(dt, c.batch, c.K, c.N, c.b_transposed, c.pad, c.shared_b, rng);
    std::vector<float> bias32(c.N);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& x : bias32) x = u(rng);
    std::vector<unsigned char> bias_bytes(c.N * dt.itemsize());
    convert_buffer(bias32.data(), kFloat32, bias_bytes.data(), dt, c.N);
    convert_buffer(bias_bytes.data(), dt, bias32.data(), kFloat32, c.N);  // the rounded values
    std::vector<unsigned char> cbuf(c.batch * c.M * c.N * out.itemsize());
    GemmArgs g;
    g.dtype = dt;
    g.out_dtype = out;
    g.batch = c.batch;
    g.M = c.M;
    g.N = c.N;
    g.K = c.K;
    g.a = {a.bytes.data(), a.rs, a.cs, a.offsets.data()};
    g.b = {b.bytes.data(), b.rs, b.cs, b.offsets.data()};
    g.bias = c.bias ? bias_bytes.data() : nullptr;
    g.c = cbuf.data();
    kernels::gemm_native(g);
    int bad = 0;
    for (int64_t i = 0; i < c.batch; ++i)
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t n = 0; n < c.N; ++n) {
          const float want = model(a, b, i, m, n, c.K, c.bias ? bias32.data() : nullptr, false, 1);
          const int64_t e = (i * c.M + m) * c.N + n;
          const float got = output(cbuf, out, e);
          if (bits_of(got, out) != bits_of(want, out) && ++bad <= 3)
            ADD_FAILURE() << "entry " << i << " (" << m << ", " << n << "): got " << got
                          << ", want " << want;
        }
  }
}

TEST(GemmNarrowAvx2, F32BitsAreTheDocumentedLaneTree) {
  SKIP_WITHOUT_AVX2_PATH();
  check_native(kFloat32, kFloat32, 1);
}

TEST(GemmNarrowAvx2, Bf16OperandsAndOutputsAreWidenedThenRoundedOnce) {
  SKIP_WITHOUT_AVX2_PATH_FOR(kBFloat16);
  check_native(kBFloat16, kFloat32, 2);
  check_native(kBFloat16, kBFloat16, 3);
}

TEST(GemmNarrowAvx2, F16OperandsAndOutputsAreWidenedThenRoundedOnce) {
  SKIP_WITHOUT_AVX2_PATH_FOR(kFloat16);
  check_native(kFloat16, kFloat32, 4);
  check_native(kFloat16, kFloat16, 5);
}

// FP8 weights go through the low-bit driver's panel packer into the same rows; its scale
// epilogue multiplies the sum by alpha before the bias, each rounded once.
TEST(GemmNarrowAvx2, Fp8WeightsWithTheScaleEpilogue) {
  SKIP_WITHOUT_AVX2_PATH();
  std::mt19937 rng(6);
  for (DType fp8 : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    for (int64_t N : {1, 10, 16}) {
      const int64_t M = 37, K = 300;
      SCOPED_TRACE(::testing::Message() << fp8.name() << " N " << N);
      const Operand a = make(kFloat32, 1, M, K, false, 0, false, rng);
      const Operand b = make(fp8, 1, K, N, true, 0, false, rng);
      std::vector<float> bias(N, 0.25f), c(M * N);
      GemmArgs g;
      g.out_dtype = kFloat32;
      g.M = M;
      g.N = N;
      g.K = K;
      g.a = {a.bytes.data(), a.rs, a.cs, nullptr};
      g.b = {b.bytes.data(), b.rs, b.cs, nullptr};
      g.bias = bias.data();
      g.c = c.data();
      kernels::GemmLowbit lb;
      lb.a_dtype = kFloat32;
      lb.b_dtype = fp8;
      lb.scale_epilogue = true;
      lb.alpha = 0.375f;
      kernels::gemm_native_lowbit(g, lb);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n)
          ASSERT_EQ(c[m * N + n], model(a, b, 0, m, n, K, bias.data(), true, lb.alpha))
              << "(" << m << ", " << n << ")";
    }
  }
}

TEST(GemmNarrowAvx2, SameBitsWithOneTwoAndThreeThreads) {
#ifdef _OPENMP
  SKIP_WITHOUT_AVX2_PATH();
  std::mt19937 rng(7);
  // Large enough to run in parallel and to pack B on several threads (16 x 5000).
  const int64_t shapes[][3] = {{256, 1024, 10}, {1000, 128, 16}, {30, 5000, 16}, {7, 64, 3}};
  for (const auto& s : shapes) {
    for (bool b_t : {true, false}) {
      const Operand a = make(kFloat32, 1, s[0], s[1], false, 0, false, rng);
      const Operand b = make(kFloat32, 1, s[1], s[2], b_t, 0, false, rng);
      auto run = [&](int threads) {
        omp_set_num_threads(threads);
        std::vector<float> c(s[0] * s[2]);
        GemmArgs g;
        g.M = s[0];
        g.N = s[2];
        g.K = s[1];
        g.a = {a.bytes.data(), a.rs, a.cs, nullptr};
        g.b = {b.bytes.data(), b.rs, b.cs, nullptr};
        g.c = c.data();
        kernels::gemm_native(g);
        return c;
      };
      const int before = omp_get_max_threads();
      const std::vector<float> one = run(1);
      for (int threads : {2, 3})
        EXPECT_EQ(one, run(threads)) << s[0] << "x" << s[1] << "x" << s[2] << " b_t " << b_t << ", "
                                     << threads << " threads";
      omp_set_num_threads(before);
    }
  }
#else
  GTEST_SKIP() << "built without OpenMP";
#endif
}

// The auto backend sends narrow products with A not transposed and K >= kAvx2NarrowMinK here,
// in every dtype (bf16/f16 would otherwise pay a widening pass before oneDNN).
TEST(GemmNarrowAvx2, AutoRoutesNarrowProductsHere) {
  SKIP_WITHOUT_AVX2_PATH();
  const kernels::GemmBackend before = kernels::gemm_backend();
  kernels::set_gemm_backend(kernels::GemmBackend::kAuto);
  for (DType dt : {kFloat32, kBFloat16, kFloat16}) {
    EXPECT_TRUE(kernels::use_native_gemm(dt, 1, 256, 10, 1024)) << dt.name();
    EXPECT_TRUE(kernels::use_native_gemm(dt, 1, 128, 16, kernels::kAvx2NarrowMinK)) << dt.name();
  }
  // Transposed A (a weight gradient's dY^T), a short K and 17 columns stay where they were.
  EXPECT_FALSE(kernels::use_native_gemm(kFloat32, 1, 256, 10, 1024, true));
  EXPECT_FALSE(kernels::use_native_gemm(kFloat32, 1, 256, 10, kernels::kAvx2NarrowMinK - 1));
  EXPECT_FALSE(kernels::use_native_gemm(kFloat32, 1, 256, 17, 784));
  kernels::set_gemm_backend(before);
}

}  // namespace
}  // namespace mantissa
