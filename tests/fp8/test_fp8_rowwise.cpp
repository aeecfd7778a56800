// torchao's rowwise float8 recipes (`rowwise`, `rowwise-gw-hp`): per-row scales and bytes
// against torchao's amax_to_scale and the OCP formats worked out here (fp8_reference.h), edge
// rows (zero, inf, NaN, at and beyond the format max, subnormal), the rowwise GEMM against a
// float64 product of the dequantized operands, the FP8 Linear's forward and gradients against
// the recipes' formulas, and short training runs that converge.
#include "mantissa/fp8/rowwise.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "fp8/fp8_reference.h"
#include "fp8/fp8_training_fixture.h"
#include "kernels/cpu/fp8/fp8_cast.h"
#include "kernels/cpu/fp8/rowwise_cast.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/mantissa.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"

namespace mantissa::fp8 {
namespace {

using testing_fixture::train_losses;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// torchao's amax_to_scale written out: fp8_max / clamp(amax, 1e-12) in float64, then float32;
// power_2: 2^floor(log2(s)).
float expected_scale(float amax, bool power_2) {
  if (std::isnan(amax)) return kNaN;
  const double q = 448.0 / std::max(static_cast<double>(amax), 1e-12);
  float s = static_cast<float>(q);
  if (power_2 && s > 0.0f) s = static_cast<float>(std::exp2(std::floor(std::log2(s))));
  return s;
}

std::vector<float> randn(int64_t n, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  return v;
}

bool same_float(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Quantizes `rows` rows of `cols` values and checks every scale and byte.
void check_rows(const std::vector<float>& v, int64_t rows, int64_t cols, bool power_2) {
  const RowwiseFp8 q = quantize_rows(tensor(v, {rows, cols}), kFloat8_e4m3fn, power_2);
  const auto* codes = static_cast<const uint8_t*>(q.codes.data_ptr());
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    bool nan = false;
    for (int64_t c = 0; c < cols; ++c) {
      const float a = std::fabs(v[static_cast<size_t>(r * cols + c)]);
      nan = nan || std::isnan(a);
      if (a > amax) amax = a;
    }
    const float scale = expected_scale(nan ? kNaN : amax, power_2);
    EXPECT_TRUE(same_float(q.scale.data<float>()[r], scale))
        << "row " << r << ": " << q.scale.data<float>()[r] << " vs " << scale;
    EXPECT_TRUE(same_float(q.scale_inv.data<float>()[r], 1.0f / scale)) << "row " << r;
    for (int64_t c = 0; c < cols; ++c) {
      const float x = v[static_cast<size_t>(r * cols + c)];
      EXPECT_EQ(codes[r * cols + c], reference::encode(x * scale, true))
          << "row " << r << " col " << c << ": " << x << " * " << scale;
    }
  }
}

TEST(Fp8Rowwise, ScaleIsTorchaosAmaxToScale) {
  EXPECT_EQ(torchao_scale(3.0f, 448.0f, false), static_cast<float>(448.0 / 3.0));
  EXPECT_EQ(torchao_scale(3.0f, 448.0f, true), 128.0f);
  EXPECT_EQ(torchao_scale(448.0f, 448.0f, true), 1.0f);
  EXPECT_EQ(torchao_scale(896.0f, 448.0f, false), 0.5f);
  // Below torchao's EPS (and 0): the amax is taken as 1e-12.
  EXPECT_EQ(torchao_scale(0.0f, 448.0f, false), static_cast<float>(448.0 / 1e-12));
  EXPECT_EQ(torchao_scale(1e-40f, 448.0f, true), std::ldexp(1.0f, 48));  // 4.48e14 -> 2^48
  EXPECT_EQ(torchao_scale(kInf, 448.0f, true), 0.0f);
  EXPECT_TRUE(std::isnan(torchao_scale(kNaN, 448.0f, true)));
  for (float amax : {1.0f, 0.37f, 1e6f, 5e-30f, 65504.0f})
    for (bool p2 : {false, true})
      EXPECT_EQ(torchao_scale(amax, 448.0f, p2), expected_scale(amax, p2)) << amax << " " << p2;
}

TEST(Fp8Rowwise, RowScalesAndBytes) {
  for (bool p2 : {false, true}) {
    check_rows(randn(7 * 33, 2.0f, 5), 7, 33, p2);
    // Edge rows: all zero, an inf (scale 0: the inf becomes NaN, the rest 0), a NaN (NaN
    // scale, every code NaN), at the max, beyond it, a subnormal amax.
    check_rows({0.0f, -0.0f, 0.0f,    //
                1.0f, -kInf, 2.0f,    //
                1.0f, kNaN, -3.0f,    //
                448.0f, -7.0f, 0.5f,  //
                1e6f, -2.0f, 3e5f,    //
                1e-40f, -5e-41f, 0.0f},
               6, 3, p2);
  }
}

TEST(Fp8Rowwise, TensorwiseScaleIsOneForAll) {
  const std::vector<float> v = {1.0f, -6.0f, 0.25f, 3.0f};
  const RowwiseFp8 q = quantize_tensorwise(tensor(v, {2, 2}), kFloat8_e4m3fn, false);
  ASSERT_EQ(q.scale.numel(), 1);
  EXPECT_EQ(q.scale.data<float>()[0], expected_scale(6.0f, false));
  const auto* codes = static_cast<const uint8_t*>(q.codes.data_ptr());
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(codes[i], reference::encode(v[i] * q.scale.data<float>()[0], true)) << i;
}

// The float64 product of the dequantized operands (A [M, K] rows scaled, B [N, K] rows scaled).
std::vector<double> dequantized_product(const RowwiseFp8& a, const RowwiseFp8& b) {
  const int64_t M = a.codes.size(0), K = a.codes.size(1), N = b.codes.size(0);
  const auto* ac = static_cast<const uint8_t*>(a.codes.data_ptr());
  const auto* bc = static_cast<const uint8_t*>(b.codes.data_ptr());
  std::vector<double> out(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += reference::decode(ac[m * K + k], true) * reference::decode(bc[n * K + k], true);
      out[static_cast<size_t>(m * N + n)] =
          s * a.scale_inv.data<float>()[m] * b.scale_inv.data<float>()[n];
    }
  return out;
}

TEST(Fp8Rowwise, GemmEqualsTheDequantizedProduct) {
  const int64_t M = 9, K = 70, N = 11;
  std::vector<float> av = randn(M * K, 1.0f, 1), bv = randn(N * K, 0.05f, 2);
  for (int64_t k = 0; k < K; ++k) av[static_cast<size_t>(3 * K + k)] *= 1000.0f;  // a loud row
  const RowwiseFp8 a = quantize_rows(tensor(av, {M, K}), kFloat8_e4m3fn, true);
  const RowwiseFp8 b = quantize_rows(tensor(bv, {N, K}), kFloat8_e4m3fn, true);
  const Tensor got = rowwise_gemm(a, b, true, kFloat32);
  const std::vector<double> want = dequantized_product(a, b);
  const auto* ac = static_cast<const uint8_t*>(a.codes.data_ptr());
  const auto* bc = static_cast<const uint8_t*>(b.codes.data_ptr());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      // fp32 accumulation of K exact products, then two scalings: K + 2 roundings at most.
      double mag = 0;
      for (int64_t k = 0; k < K; ++k)
        mag += std::fabs(reference::decode(ac[m * K + k], true) *
                         reference::decode(bc[n * K + k], true));
      mag *= a.scale_inv.data<float>()[m] * b.scale_inv.data<float>()[n];
      const double bound = (K + 2) * std::ldexp(1.0, -24) * mag + 1e-30;
      EXPECT_NEAR(got.data<float>()[m * N + n], want[static_cast<size_t>(m * N + n)], bound)
          << m << "," << n;
    }
  // A scale of 0 (an inf row) or NaN (a NaN row) shows in its output row, as torch._scaled_mm.
  std::vector<float> cv = randn(2 * K, 1.0f, 3);
  cv[0] = kInf;
  const RowwiseFp8 c = quantize_rows(tensor(cv, {2, K}), kFloat8_e4m3fn, true);
  const Tensor gc = rowwise_gemm(c, b, true, kFloat32);
  EXPECT_TRUE(std::isnan(gc.data<float>()[0]));
  EXPECT_TRUE(std::isfinite(gc.data<float>()[N]));
}

Recipe rowwise_recipe(bool gw_hp) {
  Recipe r;
  r.kind = gw_hp ? RecipeKind::kRowwiseGwHp : RecipeKind::kRowwise;
  return r;
}

// The bits of a float tensor, for exact comparisons (NaN included).
std::vector<uint32_t> bits_of(const Tensor& t) {
  std::vector<uint32_t> out;
  for (float v : t.contiguous().to(kFloat32).to_vector<float>())
    out.push_back(std::bit_cast<uint32_t>(v));
  return out;
}

std::vector<uint8_t> codes_of(const Tensor& codes) {
  const auto* p = static_cast<const uint8_t*>(codes.data_ptr());
  return std::vector<uint8_t>(p, p + codes.numel());
}

// quantize_columns(t) is quantize_rows(t^T) with the codes left in t's layout: every code,
// scale, amax and count the same, for float32, bfloat16 and float16 sources, NaN, inf, zero and
// flushing columns, widths with vector tails; and the rowwise products of such operands (the
// Linear's dx = dy Qcol(W)^T and dW = Qcol(dy) Qcol(x)^T) are the products of the transposed
// copies bit for bit.
TEST(Fp8Rowwise, ColumnsAreTheRowsOfTheTransposeBitForBit) {
  for (DType dt : {kFloat32, kBFloat16, kFloat16})
    for (bool p2 : {true, false})
      for (const auto& [rows, cols] :
           std::vector<std::pair<int64_t, int64_t>>{{6, 40}, {37, 13}, {64, 100}, {300, 9}}) {
        SCOPED_TRACE(fmt::format("{} {}x{} power_2 {}", dt.name(), rows, cols, p2));
        std::vector<float> v = randn(rows * cols, 3.0f, static_cast<uint32_t>(rows + cols));
        v[static_cast<size_t>(1 * cols + 2 % cols)] = kNaN;   // column 2: NaN scale
        v[static_cast<size_t>(3 * cols + 4 % cols)] = -kInf;  // column 4: inf amax
        for (int64_t r = 0; r < rows; ++r) v[static_cast<size_t>(r * cols)] = 0.0f;  // a zero one
        v[static_cast<size_t>((rows - 1) * cols + cols - 1)] = 1e6f;  // the others flushed
        v[static_cast<size_t>(cols - 1)] = 1e-3f;
        const Tensor t = tensor(v, {rows, cols}).to(dt);
        const RowwiseFp8 got = quantize_columns(t, kFloat8_e4m3fn, p2);
        const RowwiseFp8 want = quantize_rows(t.t().contiguous(), kFloat8_e4m3fn, p2);
        ASSERT_TRUE(got.transposed);
        ASSERT_EQ(got.codes.shape(), (Shape{rows, cols}));
        const auto* gc = static_cast<const uint8_t*>(got.codes.data_ptr());
        const auto* wc = static_cast<const uint8_t*>(want.codes.data_ptr());
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c)
            ASSERT_EQ(gc[r * cols + c], wc[c * rows + r]) << "row " << r << " col " << c;
        EXPECT_EQ(bits_of(got.scale), bits_of(want.scale));
        EXPECT_EQ(bits_of(got.scale_inv), bits_of(want.scale_inv));
        EXPECT_EQ(std::bit_cast<uint32_t>(got.amax), std::bit_cast<uint32_t>(want.amax));
        EXPECT_EQ(got.counts.total, want.counts.total);
        EXPECT_EQ(got.counts.saturated, want.counts.saturated);
        EXPECT_EQ(got.counts.flushed, want.counts.flushed);
        EXPECT_EQ(got.counts.peak, want.counts.peak);
        EXPECT_GT(want.counts.flushed, 0);
      }
  // The products, from finite operands (a NaN scale would make both all NaN), with dx and dW
  // wide and narrow (12 input features: at most 16 output columns), and at a GPT layer's size
  // (2048 tokens, 256 -> 768: a GEMM whose order follows the layout gives other bits there).
  for (bool p2 : {true, false})
    for (const auto& [M, K, N] :
         std::vector<std::array<int64_t, 3>>{{301, 70, 19}, {301, 12, 19}, {2048, 256, 768}}) {
      // Values over a wide range of magnitudes, so that fp32 sums in another order round
      // differently.
      auto wide = [](int64_t n, uint32_t seed) {
        std::vector<float> v = randn(n, 1.0f, seed);
        for (size_t i = 0; i < v.size(); ++i)
          v[i] = std::ldexp(v[i], static_cast<int>(i * 7 % 17) - 8);
        return v;
      };
      const Tensor x = tensor(wide(M * K, 21), {M, K}).to(kBFloat16);
      const Tensor w = tensor(wide(N * K, 22), {N, K}).to(kBFloat16);
      const Tensor dy = tensor(wide(M * N, 23), {M, N}).to(kBFloat16);
      const RowwiseFp8 qdy = quantize_rows(dy, kFloat8_e4m3fn, p2);
      for (DType out : {kFloat32, kBFloat16}) {
        EXPECT_EQ(bits_of(rowwise_gemm(qdy, quantize_columns(w, kFloat8_e4m3fn, p2), true, out)),
                  bits_of(rowwise_gemm(qdy, quantize_rows(w.t().contiguous(), kFloat8_e4m3fn, p2),
                                       true, out)));
        EXPECT_EQ(bits_of(rowwise_gemm(quantize_columns(dy, kFloat8_e4m3fn, p2),
                                       quantize_columns(x, kFloat8_e4m3fn, p2), true, out)),
                  bits_of(rowwise_gemm(quantize_rows(dy.t().contiguous(), kFloat8_e4m3fn, p2),
                                       quantize_rows(x.t().contiguous(), kFloat8_e4m3fn, p2), true,
                                       out)));
      }
    }
}

// The 16-bit-lane cast of bfloat16 under a power-of-2 scale 2^e (rowwise_cast.h) against the
// scalar cast, for every finite bfloat16 value whose product stays within 448: every code
// boundary, subnormal codes and subnormal inputs, zeros of both signs; the lengths leave a tail.
TEST(Fp8Rowwise, Bf16PowerOfTwoCastIsTheScalarCastForEveryValue) {
  if (!kernels::fp8::rowwise_bf16_usable()) GTEST_SKIP() << "no AVX2";
  for (int e : {-126, -100, -20, -7, 0, 3, 9, 40, 100, 127}) {
    SCOPED_TRACE(fmt::format("scale 2^{}", e));
    const float scale = std::ldexp(1.0f, e);
    std::vector<uint16_t> v;
    float amax = 0.0f;
    for (uint32_t b = 0; b < 0x10000u; ++b) {
      const float x = std::bit_cast<float>(b << 16);
      if (!std::isfinite(x) || !(std::fabs(x) * scale <= 448.0f)) continue;
      v.push_back(static_cast<uint16_t>(b));
      amax = std::max(amax, std::fabs(x));
    }
    v.resize(v.size() / 16 * 16 + 7);  // a tail of 7
    const auto n = static_cast<int64_t>(v.size());
    std::vector<uint8_t> got(v.size()), want(v.size());
    kernels::fp8::CastStats st, ref;
    ASSERT_TRUE(kernels::fp8::cast_bf16_pow2(v.data(), got.data(), n, scale, amax, &st));
    ref = kernels::fp8::detail::scaled_cast_scalar(v.data(), kBFloat16, want.data(), n, scale,
                                                   kFloat8_e4m3fn);
    for (size_t i = 0; i < v.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "bf16 bits " << std::hex << v[i];
    EXPECT_EQ(st.saturated, ref.saturated);
    EXPECT_EQ(st.flushed, ref.flushed);
    if (e < 127) EXPECT_GT(ref.flushed, 0);  // (2^-133 * 2^127 is E4M3's 2^-6)
    // As columns: each column its own scale, 2^e or 2^(e - 1) (a smaller product); 37 columns
    // (16 at a time, a tail) and 200 (64 at a time where every scale is at most 2^120).
    if (e == -126) continue;  // 2^-127 is not a normal scale
    for (const int64_t cols : {37, 200}) {
      const int64_t rows = n / cols;
      std::vector<float> scales(cols), amaxes(cols, 0.0f);
      for (int64_t c = 0; c < cols; ++c) {
        scales[static_cast<size_t>(c)] = c % 3 == 0 ? scale / 2 : scale;
        for (int64_t r = 0; r < rows; ++r)
          amaxes[static_cast<size_t>(c)] =
              std::max(amaxes[static_cast<size_t>(c)],
                       std::fabs(std::bit_cast<float>(uint32_t{v[r * cols + c]} << 16)));
      }
      ASSERT_TRUE(kernels::fp8::cast_columns_bf16_pow2(v.data(), got.data(), rows, cols,
                                                       scales.data(), amaxes.data(), &st));
      ref = kernels::fp8::scaled_cast_columns(v.data(), kBFloat16, want.data(), rows, cols,
                                              scales.data(), kFloat8_e4m3fn, SimdLevel::kScalar);
      for (int64_t i = 0; i < rows * cols; ++i)
        ASSERT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << cols << " " << i;
      EXPECT_EQ(st.saturated, ref.saturated);
      EXPECT_EQ(st.flushed, ref.flushed);
    }
  }
  {
    // A matrix large enough that the columns' codes are streamed past the caches (8 Mi values),
    // with a subnormal code here and there.
    const int64_t rows = 2048, cols = 4096;
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    std::vector<uint16_t> m(static_cast<size_t>(rows * cols));
    for (auto& b : m) b = float_to_bf16_bits(nd(rng));
    for (size_t i = 0; i < m.size(); i += 7919) m[i] = 0x0001;
    std::vector<float> scales(cols), amaxes(cols);
    ASSERT_TRUE(kernels::fp8::bf16_column_amax_without_nan(m.data(), rows, cols, amaxes.data()));
    for (int64_t c = 0; c < cols; ++c)
      scales[static_cast<size_t>(c)] =
          std::ldexp(1.0f, static_cast<int>(std::floor(std::log2(448.0f / amaxes[c]))));
    std::vector<uint8_t> want(m.size()), buffer(m.size() + 32);
    uint8_t* got = buffer.data() + (32 - reinterpret_cast<uintptr_t>(buffer.data()) % 32) % 32;
    kernels::fp8::CastStats st;
    ASSERT_TRUE(kernels::fp8::cast_columns_bf16_pow2(m.data(), got, rows, cols, scales.data(),
                                                     amaxes.data(), &st));
    const kernels::fp8::CastStats ref =
        kernels::fp8::scaled_cast_columns(m.data(), kBFloat16, want.data(), rows, cols,
                                          scales.data(), kFloat8_e4m3fn, SimdLevel::kScalar);
    EXPECT_EQ(want, std::vector<uint8_t>(got, got + m.size()));
    EXPECT_EQ(st.saturated, ref.saturated);
    EXPECT_EQ(st.flushed, ref.flushed);
    EXPECT_GT(ref.flushed, 0);
  }
  // Where the preconditions fail the kernels decline: a scale that is no power of two, 0, an
  // infinite amax, a product above 448.
  const std::vector<uint16_t> one(16, 0x3F80);  // 1.0
  std::vector<uint8_t> out(16);
  kernels::fp8::CastStats st;
  EXPECT_FALSE(kernels::fp8::cast_bf16_pow2(one.data(), out.data(), 16, 3.0f, 1.0f, &st));
  EXPECT_FALSE(kernels::fp8::cast_bf16_pow2(one.data(), out.data(), 16, 0.0f, 1.0f, &st));
  EXPECT_FALSE(kernels::fp8::cast_bf16_pow2(one.data(), out.data(), 16, 256.0f, kInf, &st));
  EXPECT_FALSE(kernels::fp8::cast_bf16_pow2(one.data(), out.data(), 16, 512.0f, 1.0f, &st));
  float amax = 0.0f;
  std::vector<uint16_t> nan_row(40, 0x3F80);
  nan_row[33] = 0x7FC0;
  EXPECT_FALSE(kernels::fp8::bf16_amax_without_nan(nan_row.data(), 40, &amax));
  std::vector<float> col_amax(20);
  EXPECT_FALSE(kernels::fp8::bf16_column_amax_without_nan(nan_row.data(), 2, 20, col_amax.data()));
  nan_row[33] = 0xC000;  // -2
  ASSERT_TRUE(kernels::fp8::bf16_amax_without_nan(nan_row.data(), 40, &amax));
  EXPECT_EQ(amax, 2.0f);
  ASSERT_TRUE(kernels::fp8::bf16_column_amax_without_nan(nan_row.data(), 2, 20, col_amax.data()));
  EXPECT_EQ(col_amax[13], 2.0f);
  EXPECT_EQ(col_amax[12], 1.0f);
}

// bf16_column_amax_without_nan over a matrix large enough that its rows are split into bands over
// threads (three here; 301 rows do not divide evenly): each column's amax is a plain loop's, with
// maxima in the first and the last row, and a NaN in the last band alone is found.
TEST(RowwiseCast, Bf16ColumnAmaxOverBandsOfRows) {
  if (!kernels::fp8::rowwise_bf16_usable()) GTEST_SKIP() << "no AVX2";
  const int threads = omp_get_max_threads();
  omp_set_num_threads(3);
  const int64_t rows = 301, cols = 257;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<uint16_t> m(static_cast<size_t>(rows * cols));
  for (auto& b : m) b = float_to_bf16_bits(nd(rng));
  m[3] = float_to_bf16_bits(-65536.0f);
  m[static_cast<size_t>((rows - 1) * cols + 4)] = float_to_bf16_bits(50000.0f);
  m[static_cast<size_t>((rows - 1) * cols + cols - 1)] = float_to_bf16_bits(-70000.0f);
  std::vector<float> got(static_cast<size_t>(cols));
  ASSERT_TRUE(kernels::fp8::bf16_column_amax_without_nan(m.data(), rows, cols, got.data()));
  for (int64_t c = 0; c < cols; ++c) {
    float want = 0.0f;
    for (int64_t r = 0; r < rows; ++r)
      want = std::max(want, std::fabs(bf16_bits_to_float(m[static_cast<size_t>(r * cols + c)])));
    ASSERT_EQ(got[static_cast<size_t>(c)], want) << "column " << c;
  }
  EXPECT_EQ(got[3], 65536.0f);
  m[static_cast<size_t>((rows - 1) * cols + 5)] = 0x7FC0;
  EXPECT_FALSE(kernels::fp8::bf16_column_amax_without_nan(m.data(), rows, cols, got.data()));
  omp_set_num_threads(threads);
}

// The float32 rows' and columns' casts under power-of-2 scales (cast_f32_pow2,
// cast_columns_f32_pow2: the bits rounded to odd at bfloat16's width, then the 16-bit-lane codes)
// against the scalar cast: every finite bfloat16
// value whose product stays within 448 with low halves 0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF and
// one drawn (E4M3's ties, the values beside them, a bottom half that alone decides the rounding,
// subnormal codes and inputs, zeros of both signs), shuffled so that the 64-value steps with a
// subnormal or flushed code lie among the others, and a tail of 23.
TEST(Fp8Rowwise, Float32PowerOfTwoCastIsTheScalarCast) {
  if (!kernels::fp8::rowwise_bf16_usable()) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(5);
  for (int e : {-126, -100, -20, -7, 0, 3, 9, 40, 100, 120}) {
    SCOPED_TRACE(fmt::format("scale 2^{}", e));
    const float scale = std::ldexp(1.0f, e);
    std::vector<float> v;
    float amax = 0.0f;
    for (uint32_t b = 0; b < 0x10000u; ++b)
      for (uint32_t low :
           {0u, 1u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu, static_cast<uint32_t>(rng() & 0xFFFFu)}) {
        const float x = std::bit_cast<float>(b << 16 | low);
        if (!std::isfinite(x) || !(std::fabs(x) * scale <= 448.0f)) continue;
        v.push_back(x);
        amax = std::max(amax, std::fabs(x));
      }
    std::shuffle(v.begin(), v.end(), rng);
    v.resize(v.size() / 64 * 64 + 23);
    const auto n = static_cast<int64_t>(v.size());
    amax = 0.0f;
    for (float x : v) amax = std::max(amax, std::fabs(x));
    std::vector<uint8_t> want(v.size()), buffer(v.size() + 32);
    const kernels::fp8::CastStats ref = kernels::fp8::detail::scaled_cast_scalar(
        v.data(), kFloat32, want.data(), n, scale, kFloat8_e4m3fn);
    EXPECT_GT(ref.flushed, 0);
    // Plain stores, and streamed into a 32-byte aligned buffer with the next values fetched.
    for (const bool stream : {false, true}) {
      uint8_t* got = buffer.data() + (32 - reinterpret_cast<uintptr_t>(buffer.data()) % 32) % 32;
      kernels::fp8::CastStats st;
      ASSERT_TRUE(kernels::fp8::cast_f32_pow2(v.data(), got, n, scale, amax, &st,
                                              stream ? v.data() : nullptr, stream));
      for (size_t i = 0; i < v.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << "float32 bits " << std::hex << std::bit_cast<uint32_t>(v[i]);
      EXPECT_EQ(st.saturated, ref.saturated);
      EXPECT_EQ(st.flushed, ref.flushed);
      EXPECT_EQ(st.amax, amax);
    }
    // As 200 columns (three 64-column steps and a tail of 8), each its own scale 2^e or
    // 2^(e - 1).
    if (e == -126) continue;  // 2^-127 is not a normal scale
    const int64_t cols = 200, rows = n / cols;
    std::vector<float> scales(cols), amaxes(cols, 0.0f);
    for (int64_t c = 0; c < cols; ++c) {
      scales[static_cast<size_t>(c)] = c % 3 == 0 ? scale / 2 : scale;
      for (int64_t r = 0; r < rows; ++r)
        amaxes[static_cast<size_t>(c)] =
            std::max(amaxes[static_cast<size_t>(c)], std::fabs(v[r * cols + c]));
    }
    kernels::fp8::CastStats st;
    ASSERT_TRUE(kernels::fp8::cast_columns_f32_pow2(v.data(), buffer.data(), rows, cols,
                                                    scales.data(), amaxes.data(), &st));
    const kernels::fp8::CastStats cref =
        kernels::fp8::scaled_cast_columns(v.data(), kFloat32, want.data(), rows, cols,
                                          scales.data(), kFloat8_e4m3fn, SimdLevel::kScalar);
    for (int64_t i = 0; i < rows * cols; ++i)
      ASSERT_EQ(buffer[static_cast<size_t>(i)], want[static_cast<size_t>(i)])
          << "column " << i % cols;
    EXPECT_EQ(st.saturated, cref.saturated);
    EXPECT_EQ(st.flushed, cref.flushed);
    EXPECT_GT(cref.flushed, 0);
  }
  {
    // Columns large enough that their codes are streamed past the caches (8 Mi values), with a
    // subnormal code here and there.
    const int64_t rows = 2048, cols = 4096;
    std::normal_distribution<float> nd(0.0f, 2.0f);
    std::vector<float> m(static_cast<size_t>(rows * cols));
    for (auto& x : m) x = nd(rng);
    for (size_t i = 0; i < m.size(); i += 7919) m[i] = 1e-30f;
    std::vector<float> scales(cols), amaxes(cols, 0.0f);
    for (int64_t i = 0; i < rows * cols; ++i)
      amaxes[static_cast<size_t>(i % cols)] =
          std::max(amaxes[static_cast<size_t>(i % cols)], std::fabs(m[static_cast<size_t>(i)]));
    for (int64_t c = 0; c < cols; ++c)
      scales[static_cast<size_t>(c)] =
          std::ldexp(1.0f, static_cast<int>(std::floor(std::log2(448.0f / amaxes[c]))));
    std::vector<uint8_t> want(m.size()), buffer(m.size() + 32);
    uint8_t* got = buffer.data() + (32 - reinterpret_cast<uintptr_t>(buffer.data()) % 32) % 32;
    kernels::fp8::CastStats st;
    ASSERT_TRUE(kernels::fp8::cast_columns_f32_pow2(m.data(), got, rows, cols, scales.data(),
                                                    amaxes.data(), &st));
    const kernels::fp8::CastStats ref =
        kernels::fp8::scaled_cast_columns(m.data(), kFloat32, want.data(), rows, cols,
                                          scales.data(), kFloat8_e4m3fn, SimdLevel::kScalar);
    EXPECT_EQ(want, std::vector<uint8_t>(got, got + m.size()));
    EXPECT_EQ(st.saturated, ref.saturated);
    EXPECT_EQ(st.flushed, ref.flushed);
    EXPECT_GT(ref.flushed, 0);
  }
  // f32_amax_without_nan: the largest magnitude, inf kept; false with a NaN.
  float amax = 0.0f;
  std::vector<float> nan_row(40, 1.0f);
  nan_row[33] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(kernels::fp8::f32_amax_without_nan(nan_row.data(), 40, &amax));
  nan_row[33] = -2.0f;
  nan_row[39] = -3.0f;  // in the scalar tail
  ASSERT_TRUE(kernels::fp8::f32_amax_without_nan(nan_row.data(), 40, &amax));
  EXPECT_EQ(amax, 3.0f);
  nan_row[7] = -kInf;
  ASSERT_TRUE(kernels::fp8::f32_amax_without_nan(nan_row.data(), 40, &amax));
  EXPECT_EQ(amax, kInf);
  // Where the cast's preconditions fail it declines: a scale that is no power of two, 0, above
  // 2^120, an infinite amax, a product above 448.
  const std::vector<float> one(16, 1.0f);
  std::vector<uint8_t> out(16);
  kernels::fp8::CastStats st;
  EXPECT_FALSE(kernels::fp8::cast_f32_pow2(one.data(), out.data(), 16, 3.0f, 1.0f, &st));
  EXPECT_FALSE(kernels::fp8::cast_f32_pow2(one.data(), out.data(), 16, 0.0f, 1.0f, &st));
  EXPECT_FALSE(kernels::fp8::cast_f32_pow2(one.data(), out.data(), 16, 0x1p121f, 0x1p-121f, &st));
  EXPECT_FALSE(kernels::fp8::cast_f32_pow2(one.data(), out.data(), 16, 256.0f, kInf, &st));
  EXPECT_FALSE(kernels::fp8::cast_f32_pow2(one.data(), out.data(), 16, 512.0f, 1.0f, &st));
  const std::vector<float> col_scales = {1.0f, 0x1p121f}, col_amax = {1.0f, 0x1p-121f};
  EXPECT_FALSE(kernels::fp8::cast_columns_f32_pow2(one.data(), out.data(), 8, 2, col_scales.data(),
                                                   col_amax.data(), &st));
}

// quantize_rows of bfloat16 and float32 matrices under power-of-2 scales (the 64-value steps of
// rowwise_cast_avx2.cpp, streamed from 8 Mi values on, each row's successor fetched) against a
// scalar amax and cast of each row: rows all +0 or -0, with +-448 (amax * scale exactly 448), a
// subnormal amax, an infinite value, a NaN, the scales 2^119 to 2^121 around the folded
// constant's limit, subnormal codes among normal ones, and widths that leave a tail of every
// kind (16-value steps, scalar values).
TEST(Fp8Rowwise, PowerOfTwoRowsOfEveryKindAreTheScalarCast) {
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  const float kNan = std::numeric_limits<float>::quiet_NaN();
  for (const int64_t cols : {1, 15, 63, 64, 100, 4096 + 37}) {
    for (const DType dtype : {kBFloat16, kFloat32}) {
      SCOPED_TRACE(fmt::format("{} columns of {}", cols, dtype.name()));
      const int64_t rows = cols > 4096 ? 2100 : 40;  // 2100 rows: streamed codes
      std::vector<float> v(static_cast<size_t>(rows * cols));
      for (int64_t r = 0; r < rows; ++r) {
        float* row = v.data() + r * cols;
        for (int64_t c = 0; c < cols; ++c) row[c] = nd(rng);
        switch (r % 12) {
          case 0:
            std::fill_n(row, cols, 0.0f);
            break;
          case 1:
            std::fill_n(row, cols, -0.0f);
            break;
          case 2:
            row[cols / 2] = 448.0f, row[0] = -448.0f;
            break;
          case 3:
            for (int64_t c = 0; c < cols; ++c) row[c] = std::ldexp(row[c], -130);
            break;
          case 4:
            row[cols - 1] = -kInf;
            break;
          case 5:
            row[cols / 3] = kNan;
            break;
          case 6:
          case 7:
          case 8:  // scales 2^119, 2^120, 2^121
            for (int64_t c = 0; c < cols; ++c) row[c] = std::ldexp(row[c], -(r % 12) - 108);
            break;
          case 9:
            for (int64_t c = 0; c < cols; c += 7) row[c] *= 1e-6f;
            break;
          default:
            break;
        }
      }
      const Tensor x = tensor(v, {rows, cols}).to(dtype);
      const RowwiseFp8 q = quantize_rows(x, kFloat8_e4m3fn, true);
      std::vector<float> xs(static_cast<size_t>(rows * cols));
      const Tensor xf = x.to(kFloat32);
      std::copy_n(xf.data<float>(), xs.size(), xs.begin());
      std::vector<uint8_t> want(static_cast<size_t>(cols));
      int64_t saturated = 0, flushed = 0;
      const auto* got = static_cast<const uint8_t*>(q.codes.data_ptr());
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = xs.data() + r * cols;
        float amax = 0.0f;
        bool nan = false;
        for (int64_t c = 0; c < cols; ++c) {
          nan = nan || std::isnan(row[c]);
          if (!std::isnan(row[c])) amax = std::max(amax, std::fabs(row[c]));
        }
        const float scale = torchao_scale(nan ? kNan : amax, 448.0f, true);
        ASSERT_EQ(std::bit_cast<uint32_t>(q.scale.data<float>()[r]), std::bit_cast<uint32_t>(scale))
            << "row " << r;
        const kernels::fp8::CastStats st = kernels::fp8::detail::scaled_cast_scalar(
            row, kFloat32, want.data(), cols, scale, kFloat8_e4m3fn);
        saturated += st.saturated;
        flushed += st.flushed;
        for (int64_t c = 0; c < cols; ++c)
          ASSERT_EQ(got[r * cols + c], want[static_cast<size_t>(c)]) << "row " << r << " col " << c;
      }
      EXPECT_EQ(q.counts.saturated, saturated);
      EXPECT_EQ(q.counts.flushed, flushed);
      EXPECT_GT(flushed, 0);
    }
  }
}

// quantize_rows and quantize_columns of a bfloat16 tensor (the 16-bit-lane casts where a row or
// column allows them) equal those of its float32 copy (the general casts): codes, scales and
// statistics, with rows of every kind side by side.
TEST(Fp8Rowwise, Bf16OperandsCastAsTheirFloat32Copies) {
  for (const auto& [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{9, 64}, {40, 37}, {33, 256}, {7, 16}}) {
    SCOPED_TRACE(fmt::format("{}x{}", rows, cols));
    std::vector<float> v = randn(rows * cols, 1.0f, static_cast<uint32_t>(rows * cols));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = std::ldexp(v[i], static_cast<int>(i * 5 % 23) - 14);  // subnormal codes too
    for (int64_t c = 0; c < cols; ++c) v[static_cast<size_t>(2 * cols + c)] = 0.0f;  // zero row
    v[static_cast<size_t>(3 * cols + 1)] = -0.0f;
    v[static_cast<size_t>(4 * cols + 2)] = kNaN;    // a NaN row (and column)
    v[static_cast<size_t>(1 * cols + 5)] = -kInf;   // an inf row (and column)
    v[static_cast<size_t>(6 * cols + 3)] = 1e-40f;  // a bf16 subnormal
    const Tensor b = tensor(v, {rows, cols}).to(kBFloat16);
    const Tensor f = b.to(kFloat32);
    for (bool columns : {false, true}) {
      SCOPED_TRACE(columns ? "columns" : "rows");
      // The NaN and inf rows and columns also appear in a copy without them.
      for (bool special : {true, false}) {
        Tensor bb = b, ff = f;
        if (!special) {
          std::vector<float> w = f.to_vector<float>();
          for (float& x : w)
            if (!std::isfinite(x)) x = 3.0f;
          ff = tensor(w, {rows, cols});
          bb = ff.to(kBFloat16);
        }
        const RowwiseFp8 got = columns ? quantize_columns(bb, kFloat8_e4m3fn, true)
                                       : quantize_rows(bb, kFloat8_e4m3fn, true);
        const RowwiseFp8 want = columns ? quantize_columns(ff, kFloat8_e4m3fn, true)
                                        : quantize_rows(ff, kFloat8_e4m3fn, true);
        EXPECT_EQ(codes_of(got.codes), codes_of(want.codes));
        EXPECT_EQ(bits_of(got.scale), bits_of(want.scale));
        EXPECT_EQ(bits_of(got.scale_inv), bits_of(want.scale_inv));
        EXPECT_EQ(std::bit_cast<uint32_t>(got.amax), std::bit_cast<uint32_t>(want.amax));
        EXPECT_EQ(got.counts.saturated, want.counts.saturated);
        EXPECT_EQ(got.counts.flushed, want.counts.flushed);
        EXPECT_EQ(got.counts.peak, want.counts.peak);
        EXPECT_GT(want.counts.flushed, 0);
      }
    }
  }
}

// A bias handed to the rowwise product is added to the product rounded to the output dtype and
// rounded again: add(rowwise_gemm(...), bias) bit for bit, for narrow and float32 outputs, edge
// tiles, K over several blocks, and a NaN row.
TEST(Fp8Rowwise, GemmBiasIsAddedAfterTheRounding) {
  for (const auto& [M, K, N] :
       std::vector<std::array<int64_t, 3>>{{13, 40, 21}, {64, 600, 48}, {7, 9, 3}}) {
    std::vector<float> av = randn(M * K, 2.0f, 31), bv = randn(N * K, 1.0f, 32);
    av[static_cast<size_t>(K + 3)] = kNaN;  // row 1: a NaN scale
    const Tensor a = tensor(av, {M, K}).to(kBFloat16), b = tensor(bv, {N, K}).to(kBFloat16);
    const RowwiseFp8 qa = quantize_rows(a, kFloat8_e4m3fn, true);
    const RowwiseFp8 qb = quantize_rows(b, kFloat8_e4m3fn, true);
    for (DType out : {kBFloat16, kFloat16, kFloat32}) {
      SCOPED_TRACE(fmt::format("{}x{}x{} {}", M, K, N, out.name()));
      const Tensor bias = tensor(randn(N, 3.0f, 33), {N}).to(out);
      const Tensor got = rowwise_gemm(qa, qb, true, out, bias);
      const Tensor want = add(rowwise_gemm(qa, qb, true, out), bias);
      ASSERT_EQ(got.dtype(), out);
      EXPECT_EQ(bits_of(got), bits_of(want));
    }
  }
  const RowwiseFp8 q = quantize_rows(tensor(randn(8, 1.0f, 3), {2, 4}), kFloat8_e4m3fn, true);
  EXPECT_THROW(rowwise_gemm(q, q, true, kBFloat16, tensor(std::vector<float>{1.0f, 2.0f}, {2})),
               Error);
}

TEST(Fp8Rowwise, LinearForwardAndGradientsFollowTheRecipe) {
  for (bool gw_hp : {false, true}) {
    SCOPED_TRACE(gw_hp ? "rowwise-gw-hp" : "rowwise");
    manual_seed(4);
    Linear layer(40, 12, true, kFloat32, 1);
    const Tensor x = tensor(randn(6 * 40, 2.0f, 8), {6, 40});
    const Tensor g = tensor(randn(6 * 12, 1e-2f, 9), {6, 12});
    Tensor xin = x.detach();
    xin.requires_grad_(true);
    Tensor y;
    {
      Fp8Autocast ac(true, rowwise_recipe(gw_hp));
      y = layer(xin);
    }
    sum(mul(y, g)).backward();
    const bool p2 = !gw_hp;  // torchao: power-of-2 scales for rowwise only
    const Tensor w = layer.weight.detach();
    auto check = [](const Tensor& got, const Tensor& want, double rel, const char* what) {
      const std::vector<float> a = got.contiguous().to_vector<float>();
      const std::vector<float> b = want.contiguous().to_vector<float>();
      ASSERT_EQ(a.size(), b.size()) << what;
      double scale = 0;
      for (float v : b) scale = std::max(scale, static_cast<double>(std::fabs(v)));
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_NEAR(a[i], b[i], rel * scale) << what << " " << i;
    };
    const Tensor y_ref = add(rowwise_gemm(quantize_rows(x, kFloat8_e4m3fn, p2),
                                          quantize_rows(w, kFloat8_e4m3fn, p2), true, kFloat32),
                             layer.bias.detach());
    check(y, y_ref, 1e-6, "y");
    // And it is an FP8 product: not the fp32 one.
    const Tensor y32 = add(matmul(x, w.t()), layer.bias.detach());
    double diff = 0;
    for (size_t i = 0; i < 72; ++i)
      diff =
          std::max(diff, static_cast<double>(std::fabs(y.data<float>()[i] - y32.data<float>()[i])));
    EXPECT_GT(diff, 1e-4);
    const RowwiseFp8 qdy = quantize_rows(g, kFloat8_e4m3fn, p2);
    const Tensor dx_ref =
        gw_hp ? rowwise_gemm(qdy, quantize_tensorwise(w, kFloat8_e4m3fn, p2), false, kFloat32)
              : rowwise_gemm(qdy, quantize_rows(w.t().contiguous(), kFloat8_e4m3fn, p2), true,
                             kFloat32);
    check(xin.grad(), dx_ref, 1e-6, "dx");
    const Tensor dw_ref =
        gw_hp ? matmul(g.t(), x)
              : rowwise_gemm(quantize_rows(g.t().contiguous(), kFloat8_e4m3fn, p2),
                             quantize_rows(x.t().contiguous(), kFloat8_e4m3fn, p2), true, kFloat32);
    check(layer.weight.grad(), dw_ref, 1e-6, "dW");
    check(layer.bias.grad(), sum(g, {0}), 1e-6, "db");
    // The statistics: the largest amax of the last casts and the scale it gets.
    const ScalingState& st = *layer.fp8_state();
    float xa = 0;
    for (float v : x.to_vector<float>()) xa = std::max(xa, std::fabs(v));
    EXPECT_EQ(st.current_amax(0), xa);
    EXPECT_EQ(st.scale_of(0), expected_scale(xa, p2));
  }
}

TEST(Fp8Rowwise, TrainingConverges) {
  const std::vector<float> current = train_losses({{"fp8_recipe", "current"}});
  for (const char* name : {"rowwise", "rowwise-gw-hp"}) {
    const std::vector<float> l = train_losses({{"fp8_recipe", name}});
    double first = 0, last = 0;
    for (int i = 0; i < 5; ++i) first += l[static_cast<size_t>(i)] / 5;
    for (int i = 55; i < 60; ++i) last += l[static_cast<size_t>(i)] / 5;
    std::printf("%s: first %.4f last %.4f\n", name, first, last);
    EXPECT_LT(last, 0.2 * first) << name;
    EXPECT_NE(l, current) << name;
  }
  EXPECT_NE(train_losses({{"fp8_recipe", "rowwise"}}),
            train_losses({{"fp8_recipe", "rowwise-gw-hp"}}));
}

}  // namespace
}  // namespace mantissa::fp8
