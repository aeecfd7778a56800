// The MX recipes (--fp8-recipe mxfp8 | mxfp4; docs/fp8.md "MX recipes"): the layer's three
// products against a reference made of the committed cast kernels (formats::quantize_mxfp8 /
// quantize_mxfp4, dequantize) and a float64 product, within the fp32 accumulation bound, and
// bit for bit against the recipe's own composition; the statistics; training; the settings.
#include <gtest/gtest.h>

#include "fp8/fp8_training_fixture.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_gemm.h"
#include "mantissa/formats/block_formats.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/fp8/mx_linear.h"
#include "mantissa/mantissa.h"
#include "support/test_util.h"

namespace mantissa::fp8 {
namespace {

using testing_fixture::train_losses;
using namespace mantissa::testing;

std::vector<uint32_t> bits_of(const Tensor& t) {
  const std::vector<float> v = t.contiguous().to(kFloat32).to_vector<float>();
  std::vector<uint32_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = std::bit_cast<uint32_t>(v[i]);
  return b;
}

Recipe mx_recipe(RecipeKind kind, Format format = Format::kHybrid) {
  Recipe r;
  r.kind = kind;
  r.fp8_format = format;
  return r;
}

// t (rows x cols, float32) quantized by the committed cast kernels and dequantized again.
std::vector<float> through_format(const Tensor& t, FormatId f, formats::E8m0Rounding rounding) {
  const Tensor c = t.contiguous().to(kFloat32);
  const std::vector<float> v = c.to_vector<float>();
  const formats::MxOptions o{.rounding = rounding};
  const formats::BlockQuantized q = f == FormatId::kMxfp4
                                        ? formats::quantize_mxfp4(v, c.size(0), c.size(1), o)
                                        : formats::quantize_mxfp8(v, c.size(0), c.size(1), f, o);
  return formats::dequantize(q);
}

// got (M x N) against sum over k of a[m, k] * b[n, k] (+ bias) in float64, within the fp32
// accumulation bound (K + 2) * 2^-24 * sum |a b| plus the output's rounding.
void expect_product(const Tensor& got_t, const std::vector<float>& a, const std::vector<float>& b,
                    const std::vector<float>& bias, int64_t M, int64_t N, int64_t K) {
  const std::vector<float> got = got_t.contiguous().to(kFloat32).to_vector<float>();
  ASSERT_EQ(got.size(), static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = bias.empty() ? 0.0 : bias[n], mag = std::fabs(s);
      for (int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(a[m * K + k]) * b[n * K + k];
        s += p;
        mag += std::fabs(p);
      }
      ASSERT_NEAR(got[m * N + n], s, (K + 2) * std::ldexp(mag, -24) + std::ldexp(std::fabs(s), -24))
          << m << ", " << n;
    }
}

// 200 rows, 150 inputs and 130 outputs cut the 1x32 blocks of every product's K.
TEST(Fp8Mx, LinearForwardAndGradientsFollowTheRecipe) {
  struct Case {
    RecipeKind kind;
    Format format;
    FormatId fwd, grad;
    formats::E8m0Rounding rounding;
  };
  const Case cases[] = {
      {RecipeKind::kMxfp8, Format::kHybrid, FormatId::kMxfp8E4m3, FormatId::kMxfp8E5m2,
       formats::E8m0Rounding::kRceil},
      {RecipeKind::kMxfp8, Format::kE4M3, FormatId::kMxfp8E4m3, FormatId::kMxfp8E4m3,
       formats::E8m0Rounding::kRceil},
      {RecipeKind::kMxfp4, Format::kHybrid, FormatId::kMxfp4, FormatId::kMxfp4,
       formats::E8m0Rounding::kFloor},
  };
  const int64_t M = 200, K = 150, N = 130;
  for (const Case& c : cases) {
    SCOPED_TRACE(mx_recipe(c.kind, c.format).to_string());
    manual_seed(4);
    Linear layer(K, N, true, kFloat32, 1);
    const Tensor x = tensor(wide_normal(M * K, 11, 3.0f), {M, K});
    const Tensor g = tensor(wide_normal(M * N, 12, 3.0f), {M, N});
    Tensor xin = x.detach();
    xin.requires_grad_(true);
    Tensor y;
    {
      Fp8Autocast ac(true, mx_recipe(c.kind, c.format));
      y = layer(xin);
    }
    sum(mul(y, g)).backward();
    const Tensor w = layer.weight.detach(), b = layer.bias.detach();
    // Against the cast kernels and a float64 product.
    expect_product(y, through_format(x, c.fwd, c.rounding), through_format(w, c.fwd, c.rounding),
                   b.to_vector<float>(), M, N, K);
    expect_product(xin.grad(), through_format(g, c.grad, c.rounding),
                   through_format(w.t().contiguous(), c.fwd, c.rounding), {}, M, K, N);
    expect_product(layer.weight.grad(), through_format(g.t().contiguous(), c.grad, c.rounding),
                   through_format(x.t().contiguous(), c.fwd, c.rounding), {}, N, K, M);
    // Bit for bit the recipe's composition of quantize_mx and mx_gemm.
    EXPECT_EQ(bits_of(y), bits_of(mx_gemm(quantize_mx(x, c.fwd, c.rounding),
                                          quantize_mx(w, c.fwd, c.rounding), b)));
    EXPECT_EQ(bits_of(layer.weight.grad()),
              bits_of(mx_gemm(quantize_mx(g.t().contiguous(), c.grad, c.rounding),
                              quantize_mx(x.t().contiguous(), c.fwd, c.rounding))));
    const auto db = layer.bias.grad().to_vector<float>();
    const auto gs = sum(g, {0}).to_vector<float>();
    for (size_t j = 0; j < db.size(); ++j)
      EXPECT_NEAR(db[j], gs[j], 1e-4f * std::fabs(gs[j]) + 1e-5f);
    // The statistics: the tensor's amax and the multiplier of its block.
    const ScalingState& st = *layer.fp8_state();
    float xa = 0;
    for (float v : x.to_vector<float>()) xa = std::max(xa, std::fabs(v));
    EXPECT_EQ(st.current_amax(0), xa);
    const float s = st.scale_of(0);
    EXPECT_EQ(s, std::exp2(std::round(std::log2(s)))) << "a power of 2";
    const float elem_max = c.kind == RecipeKind::kMxfp4 ? 6.0f : 448.0f;
    if (c.rounding == formats::E8m0Rounding::kRceil) {
      EXPECT_LE(xa * s, elem_max);  // rounded up: nothing saturates
      EXPECT_GT(xa * s * 2, elem_max);
    } else {
      EXPECT_GE(xa * s * 2, elem_max / 1.5f);  // floor(log2 amax) - emax: amax * s in [4, 8)
      EXPECT_LT(xa * s, 2 * elem_max);
    }
  }
}

// Floored scales let a block's largest values saturate; rounded-up ones never do. Small values
// next to a large one flush to zero.
TEST(Fp8Mx, CastCountsSaturatedAndFlushedElements) {
  std::vector<float> v(64, 0.0f);
  v[0] = 7.5f;   // mxfp4 floor: scale 2^(2 - 2) = 1, 7.5 saturates to 6
  v[1] = 0.1f;   // below half of E2M1's smallest step 0.5 at that scale: flushed
  v[32] = 1.0f;  // second block: exact
  const Tensor t = tensor(v, {1, 64});
  const MxTensor f4 = quantize_mx(t, FormatId::kMxfp4, formats::E8m0Rounding::kFloor);
  EXPECT_EQ(f4.counts.total, 64);
  EXPECT_EQ(f4.counts.saturated, 1);
  EXPECT_EQ(f4.counts.flushed, 1);
  EXPECT_EQ(f4.amax, 7.5f);
  EXPECT_EQ(f4.scale, 1.0f);
  EXPECT_DOUBLE_EQ(f4.counts.peak, 7.5 / 6.0);
  // A bfloat16 source counts alike, and so does a short block (the plain loop; full blocks take
  // the AVX2 one on CPUs that have it).
  const MxTensor b4 = quantize_mx(t.to(kBFloat16), FormatId::kMxfp4, formats::E8m0Rounding::kFloor);
  EXPECT_EQ(b4.counts.saturated, 1);
  EXPECT_EQ(b4.counts.flushed, 1);
  EXPECT_EQ(b4.amax, 7.5f);
  std::vector<float> v40(40, 0.0f);
  v40[0] = 1.0f;
  v40[33] = 7.5f;
  v40[34] = 0.1f;
  const MxTensor s4 =
      quantize_mx(tensor(v40, {1, 40}), FormatId::kMxfp4, formats::E8m0Rounding::kFloor);
  EXPECT_EQ(s4.counts.saturated, 1);
  EXPECT_EQ(s4.counts.flushed, 1);
  EXPECT_EQ(s4.amax, 7.5f);
  // A tensor large enough to be counted by several threads: the sums of its rows' counts, and the
  // multiplier of the first block holding the amax.
  const int64_t R = 300, C = 256;
  std::vector<float> big = wide_normal(R * C, 21, 4.0f);
  big[250 * C + 7] = 1000.0f;
  big[270 * C + 100] = -1000.0f;
  const Tensor tb = tensor(big, {R, C});
  const MxTensor whole = quantize_mx(tb, FormatId::kMxfp4, formats::E8m0Rounding::kFloor);
  int64_t sat = 0, fl = 0;
  for (int64_t r = 0; r < R; ++r) {
    const MxTensor row = quantize_mx(tb.narrow(0, r, 1).contiguous(), FormatId::kMxfp4,
                                     formats::E8m0Rounding::kFloor);
    sat += row.counts.saturated;
    fl += row.counts.flushed;
  }
  EXPECT_GT(sat, 0);
  EXPECT_GT(fl, 0);
  EXPECT_EQ(whole.counts.saturated, sat);
  EXPECT_EQ(whole.counts.flushed, fl);
  EXPECT_EQ(whole.amax, 1000.0f);
  EXPECT_EQ(whole.scale, 0x1p-7f);  // floor(log2 1000) - 2 = 7
  const MxTensor r8 = quantize_mx(t, FormatId::kMxfp8E4m3, formats::E8m0Rounding::kRceil);
  EXPECT_EQ(r8.counts.saturated, 0);
  EXPECT_EQ(r8.counts.flushed, 0);
  EXPECT_EQ(r8.scale, 32.0f);  // 2^ceil(log2(7.5 / 448)) = 2^-5
}

// The column-wise cast read from x as it lies (kernels/cpu/mx/mx_cast.h) gives the bytes of
// mx_quantize_columns is mx_quantize over x^T made contiguous, its codes and scales transposed
// back into x's layout, for every element and rounding, float32 and bfloat16, at every SIMD
// level, with NaN, inf and blocks cut at the edges (rows 300: a short last block; 37 columns: an
// odd count for the 4-bit codes' last byte and columns beyond the vectors), single- and
// multi-threaded sizes.
TEST(Fp8Mx, ColumnCastIsTheCastOfTheContiguousTransposeTransposedBack) {
  namespace km = kernels::mx;
  std::vector<SimdLevel> levels{SimdLevel::kScalar};
  for (SimdLevel l : {SimdLevel::kAvx2, SimdLevel::kAvx512})
    if (simd_level() >= l) levels.push_back(l);
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{300, 37}, {1000, 130}, {33, 5}}) {
    std::vector<float> v = wide_normal(rows * cols, 41, 8.0f);
    v[3] = std::numeric_limits<float>::quiet_NaN();
    v[static_cast<size_t>(cols + 1)] = std::numeric_limits<float>::infinity();
    const Tensor x = tensor(v, {rows, cols});
    for (const DType dt : {kFloat32, kBFloat16}) {
      const Tensor src = x.to(dt).contiguous();
      const Tensor t = src.t().contiguous();
      for (const km::Element e : {km::Element::kE4m3, km::Element::kE5m2, km::Element::kE2m1}) {
        for (const km::E8m0Rounding r : {km::E8m0Rounding::kFloor, km::E8m0Rounding::kRceil}) {
          const int64_t t_row = km::code_bytes(e, rows), row = km::code_bytes(e, cols);
          const int64_t nb = (rows + 31) / 32;
          std::vector<uint8_t> tc(static_cast<size_t>(cols * t_row)),
              ts(static_cast<size_t>(cols * nb));
          km::mx_quantize(t.data_ptr(), dt, cols, rows, e, r, tc.data(), ts.data(),
                          SimdLevel::kScalar);
          std::vector<uint8_t> want_c(static_cast<size_t>(rows * row), 0), want_s(ts.size());
          for (int64_t c = 0; c < cols; ++c) {
            for (int64_t b = 0; b < nb; ++b) want_s[b * cols + c] = ts[c * nb + b];
            for (int64_t i = 0; i < rows; ++i) {
              if (e != km::Element::kE2m1) {
                want_c[i * row + c] = tc[c * t_row + i];
              } else {
                const int code = (tc[c * t_row + i / 2] >> ((i & 1) * 4)) & 0xF;
                want_c[i * row + c / 2] |= static_cast<uint8_t>(code << ((c & 1) * 4));
              }
            }
          }
          for (const SimdLevel level : levels) {
            std::vector<uint8_t> got_c(want_c.size(), 0xAB), got_s(want_s.size(), 0xAB);
            km::mx_quantize_columns(src.data_ptr(), dt, rows, cols, e, r, got_c.data(),
                                    got_s.data(), level);
            const std::string at = std::string(dt.name()) + " " + std::to_string(rows) + "x" +
                                   std::to_string(cols) + " element " +
                                   std::to_string(static_cast<int>(e)) + " rounding " +
                                   std::to_string(static_cast<int>(r)) + " level " +
                                   std::to_string(static_cast<int>(level));
            EXPECT_EQ(got_c, want_c) << at;
            EXPECT_EQ(got_s, want_s) << at;
          }
        }
      }
    }
  }
}

// The products of column-blocked operands (read transposed, decoded from their rows as they
// lie) give the bytes of the products of the row-blocked transposes: dW = dy^T @ x (both
// operands column-blocked) and dx = dy @ W (W column-blocked), float32 and bfloat16 results,
// every element format, K with a short last block, odd column counts, NaN and inf in the
// operands, at every SIMD level of the kernel and through fp8::mx_gemm.
TEST(Fp8Mx, ColumnBlockedOperandsGiveTheProductsOfTheRowBlockedTransposes) {
  namespace km = kernels::mx;
  std::vector<SimdLevel> levels{SimdLevel::kScalar};
  for (SimdLevel l : {SimdLevel::kAvx2, SimdLevel::kAvx512})
    if (simd_level() >= l) levels.push_back(l);
  const int64_t M = 300, N = 45, K = 77;  // dy (M, N), x (M, K), W (N, K)
  std::vector<float> dyv = wide_normal(M * N, 51, 3.0f), xv = wide_normal(M * K, 52, 3.0f),
                     wv = wide_normal(N * K, 53, 3.0f);
  dyv[7] = std::numeric_limits<float>::quiet_NaN();
  xv[K * 40 + 3] = std::numeric_limits<float>::infinity();
  const Tensor dy = tensor(dyv, {M, N}).to(kBFloat16), x = tensor(xv, {M, K}),
               w = tensor(wv, {N, K}).to(kBFloat16);
  for (const FormatId f : {FormatId::kMxfp8E4m3, FormatId::kMxfp8E5m2, FormatId::kMxfp4}) {
    const auto rd = formats::E8m0Rounding::kRceil;
    const km::Element e =
        f == FormatId::kMxfp8E4m3
            ? km::Element::kE4m3
            : (f == FormatId::kMxfp8E5m2 ? km::Element::kE5m2 : km::Element::kE2m1);
    const auto columns = [&](const Tensor& t) { return fp8::quantize_mx_columns(t, f, rd, false); };
    const fp8::MxTensor dy_rows = fp8::quantize_mx(dy, f, rd, false);
    const fp8::MxTensor dyt_rows = fp8::quantize_mx(dy.t().contiguous(), f, rd, false);
    const fp8::MxTensor xt_rows = fp8::quantize_mx(x.t().contiguous(), f, rd, false);
    const fp8::MxTensor wt_rows = fp8::quantize_mx(w.t().contiguous(), f, rd, false);
    const fp8::MxTensor dy_cols = columns(dy), x_cols = columns(x), w_cols = columns(w);
    const auto same_bytes = [](const Tensor& a, const Tensor& b) {
      return a.dtype() == b.dtype() && a.shape() == b.shape() &&
             std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * a.dtype().itemsize()) == 0;
    };
    const std::string at(formats::format_name(f));
    for (const DType out : {kFloat32, kBFloat16}) {
      const Tensor dw_old = fp8::mx_gemm(dyt_rows, xt_rows, Tensor(), out);
      const Tensor dx_old = fp8::mx_gemm(dy_rows, wt_rows, Tensor(), out);
      EXPECT_TRUE(same_bytes(fp8::mx_gemm(dy_cols, x_cols, Tensor(), out), dw_old)) << at;
      EXPECT_TRUE(same_bytes(fp8::mx_gemm(dy_rows, w_cols, Tensor(), out), dx_old)) << at;
      EXPECT_TRUE(std::isnan(dw_old.to(kFloat32).data<float>()[7 * K])) << at;  // dy's NaN
    }
    // The kernel at each level: dW's float32 bits.
    const auto view = [&](const fp8::MxTensor& q, bool t) {
      km::MxOperandView v{static_cast<const uint8_t*>(q.codes.data_ptr()),
                          static_cast<const uint8_t*>(q.scales.data_ptr()),
                          e,
                          false,
                          q.shape[0],
                          q.shape[1],
                          t};
      v.blocks = q.blocks == formats::BlockAxis::kAlongColumns ? km::MxBlocks::kAlongColumns
                                                               : km::MxBlocks::kAlongRows;
      return v;
    };
    std::vector<float> want(static_cast<size_t>(N * K)), got(want.size());
    km::mx_gemm(view(dyt_rows, false), view(xt_rows, false), N, K, M, 1.0f, nullptr, want.data(),
                SimdLevel::kScalar);
    for (const SimdLevel level : levels) {
      std::fill(got.begin(), got.end(), -1.0f);
      km::mx_gemm(view(dy_cols, true), view(x_cols, true), N, K, M, 1.0f, nullptr, got.data(),
                  level);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
          << at << " level " << static_cast<int>(level);
    }
  }
}

// A value flushed to -0 counts as flushed as one flushed to +0 does, in a full block (the AVX2
// loop on CPUs that have it, reading the packed codes) and in a short one (the plain loop), for
// float32 and bfloat16 sources.
TEST(Fp8Mx, NegativeValuesFlushedToMinusZeroAreCounted) {
  std::vector<float> v(40, 0.0f);
  v[0] = 1000.0f;
  v[1] = -1e-6f;  // full block: -0
  v[2] = 1e-6f;   // full block: +0
  v[32] = 1000.0f;
  v[33] = -1e-6f;  // the short block: -0
  const Tensor t = tensor(v, {1, 40});
  for (const DType dt : {kFloat32, kBFloat16}) {
    const MxTensor f8 = quantize_mx(t.to(dt), FormatId::kMxfp8E4m3, formats::E8m0Rounding::kRceil);
    EXPECT_EQ(f8.counts.flushed, 3) << dt.name();
    const MxTensor f4 = quantize_mx(t.to(dt), FormatId::kMxfp4, formats::E8m0Rounding::kFloor);
    EXPECT_EQ(f4.counts.flushed, 3) << dt.name();
    EXPECT_EQ(f4.counts.saturated, 2) << dt.name();  // 1000 / 2^7 above 6, in both blocks
  }
}

TEST(Fp8Mx, TrainingConverges) {
  for (const char* name : {"mxfp8", "mxfp4"}) {
    SCOPED_TRACE(name);
    const std::vector<float> l = train_losses({{"fp8_recipe", name}});
    double first = 0, last = 0;
    for (int i = 0; i < 5; ++i) first += l[static_cast<size_t>(i)] / 5;
    for (int i = 55; i < 60; ++i) last += l[static_cast<size_t>(i)] / 5;
    EXPECT_LT(last, 0.2 * first);
    for (float v : l) EXPECT_TRUE(std::isfinite(v));
    EXPECT_NE(l, train_losses({{"fp8_recipe", "current"}}));
  }
  EXPECT_NE(train_losses({{"fp8_recipe", "mxfp8"}}),
            train_losses({{"fp8_recipe", "mxfp8"}, {"fp8_format", "E4M3"}}));
}

TEST(Fp8Mx, RecipeSettings) {
  EXPECT_EQ(recipe_kind_from_string("MXFP8"), RecipeKind::kMxfp8);
  EXPECT_EQ(recipe_kind_from_string("mxfp4"), RecipeKind::kMxfp4);
  const Recipe r8 = mx_recipe(RecipeKind::kMxfp8, Format::kE4M3),
               r4 = mx_recipe(RecipeKind::kMxfp4);
  EXPECT_EQ(Recipe::from_json(r8.to_json()), r8);
  EXPECT_EQ(Recipe::from_json(r4.to_json()), r4);
  EXPECT_EQ(r8.history_rows(), 1);
  EXPECT_EQ(r8.to_string(),
            "MXFP8BlockScaling(fp8_format=E4M3, block=1x32, scale=E8M0 rounded up)");
  EXPECT_EQ(r4.to_string(),
            "MXLinearConfig(elem_dtype=float4_e2m1fn_x2, block_size=32, "
            "scale_calculation_mode=FLOOR)");
  Recipe fmt = r4;
  fmt.fp8_format = Format::kE4M3;
  expect_error([&] { fmt.validate(); }, "the mxfp4 recipe casts every tensor to E2M1");
  Recipe p2 = r8;
  p2.use_power_2_scales = true;
  expect_error([&] { p2.validate(); }, "the mxfp8 recipe's E8M0 scales are powers of 2 already");
  Recipe eps = r4;
  eps.amax_epsilon = 1e-3f;
  expect_error([&] { eps.validate(); }, "takes each E8M0 scale from its block's amax");
  Recipe f32 = r8;
  f32.use_fp32_scales = true;
  expect_error([&] { f32.validate(); }, "applies to the block recipe only");
  expect_error([&] { (void)recipe_kind_from_string("mxfp6"); }, "did you mean 'mxfp8'");
}

}  // namespace
}  // namespace mantissa::fp8
