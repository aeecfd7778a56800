// conv2d against a naive double-precision loop written from the definition, gradients against
// finite differences for every parameter class, low precision against f64, the bf16 oneDNN
// path against the f32 one, autocast dtypes and the error messages.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/gemm/gemm_f64.h"
#include "kernels/cpu/onednn/onednn_common.h"
#include "kernels/cpu/onednn/onednn_conv.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/ops/conv.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

struct ConvCase {
  const char* name;
  Shape x, w;
  bool bias;
  Size2 stride, padding, dilation;
  int64_t groups;
};

// The parameter classes gradcheck and the references cover.
const ConvCase kCases[] = {
    {"plain", {2, 3, 5, 5}, {4, 3, 3, 3}, true, {1, 1}, {0, 0}, {1, 1}, 1},
    {"padding", {2, 3, 5, 4}, {4, 3, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 1},
    {"stride2", {1, 2, 7, 6}, {3, 2, 3, 2}, true, {2, 2}, {1, 0}, {1, 1}, 1},
    {"floor_stride", {1, 2, 6, 6}, {2, 2, 3, 3}, true, {2, 2}, {0, 0}, {1, 1}, 1},
    {"dilation2", {1, 2, 7, 7}, {3, 2, 3, 3}, true, {1, 1}, {2, 1}, {2, 2}, 1},
    {"groups2", {2, 4, 5, 5}, {6, 2, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 2},
    {"depthwise", {2, 3, 5, 5}, {3, 1, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 3},
    {"no_bias", {2, 3, 4, 4}, {2, 3, 2, 2}, false, {1, 2}, {0, 1}, {1, 1}, 1},
    // Whole channel blocks (nChw8c / nChw16c): a widened bf16/f16 convolution converts these
    // in one pass with the layout change (kernels/cpu/onednn/blocked_convert.h).
    {"blocked16", {2, 16, 7, 9}, {16, 16, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 1},
    {"blocked32_stride2", {1, 32, 9, 8}, {8, 32, 3, 3}, false, {2, 2}, {1, 1}, {1, 1}, 1},
};

// conv2d by definition: y[n,o,i,j] = b[o] + sum_{c,ky,kx} x[n, g*icg + c, i*s - p + ky*d,
// j*s - p + kx*d] w[o, c, ky, kx], out-of-range input reads as zero.
std::vector<double> naive_conv(const ConvCase& cc, const std::vector<double>& x,
                               const std::vector<double>& w, const std::vector<double>& b,
                               Shape& out_shape) {
  const int64_t N = cc.x[0], C = cc.x[1], H = cc.x[2], W = cc.x[3];
  const int64_t O = cc.w[0], icg = cc.w[1], KH = cc.w[2], KW = cc.w[3];
  const int64_t OH = (H + 2 * cc.padding[0] - cc.dilation[0] * (KH - 1) - 1) / cc.stride[0] + 1;
  const int64_t OW = (W + 2 * cc.padding[1] - cc.dilation[1] * (KW - 1) - 1) / cc.stride[1] + 1;
  out_shape = {N, O, OH, OW};
  std::vector<double> y;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double s = b.empty() ? 0.0 : b[o];
          const int64_t grp = o / (O / cc.groups);
          for (int64_t c = 0; c < icg; ++c)
            for (int64_t ky = 0; ky < KH; ++ky)
              for (int64_t kx = 0; kx < KW; ++kx) {
                const int64_t yy = i * cc.stride[0] - cc.padding[0] + ky * cc.dilation[0];
                const int64_t xx = j * cc.stride[1] - cc.padding[1] + kx * cc.dilation[1];
                if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
                s += x[((n * C + grp * icg + c) * H + yy) * W + xx] *
                     w[((o * icg + c) * KH + ky) * KW + kx];
              }
          y.push_back(s);
        }
  (void)C;
  return y;
}

OpFn conv_fn(const ConvCase& cc) {
  return [cc](const std::vector<Tensor>& in) {
    return conv2d(in[0], in[1], cc.bias ? in[2] : Tensor(), cc.stride, cc.padding, cc.dilation,
                  cc.groups);
  };
}

std::vector<Tensor> conv_inputs(const ConvCase& cc, uint64_t seed) {
  std::vector<Tensor> in = {random_input(cc.x, seed), random_input(cc.w, seed + 1)};
  in.push_back(cc.bias ? random_input({cc.w[0]}, seed + 2) : Tensor());
  return in;
}

TEST(Conv2d, ForwardMatchesNaiveLoopInF64AndF32) {
  uint64_t seed = 10;
  for (const ConvCase& cc : kCases) {
    SCOPED_TRACE(cc.name);
    const auto in = conv_inputs(cc, seed += 3);
    Shape shape;
    const auto want = naive_conv(cc, vals(in[0]), vals(in[1]),
                                 cc.bias ? vals(in[2]) : std::vector<double>{}, shape);
    const Tensor y64 = conv_fn(cc)(in);
    EXPECT_EQ(y64.shape(), shape);
    EXPECT_EQ(y64.dtype(), kFloat64);
    expect_near_all(vals(y64), want, 1e-13);
    // f32 on oneDNN: inputs rounded to f32 first, fp32 accumulation over <= 27 terms.
    std::vector<Tensor> in32;
    for (const Tensor& t : in) in32.push_back(t.defined() ? t.detach().to(kFloat32) : Tensor());
    const Tensor y32 = conv_fn(cc)(in32);
    EXPECT_EQ(y32.dtype(), kFloat32);
    expect_near_all(vals(y32), want, 2e-5);
  }
}

// The gradients of the f64 convolution (im2col + the float64 GEMM, kernels/cpu/conv/conv_f64.h)
// against scatter loops over every (output, tap) pair in long double, on both GEMM paths (the
// reference one is what CPUs without AVX2 run). "chunks" takes more im2col bytes per image than
// fit 6 images in the 32 MiB buffer, so its 8 images run in two chunks.
TEST(Conv2d, F64GradientsMatchNaiveLoopsOnBothGemmPaths) {
  std::vector<ConvCase> cases(std::begin(kCases), std::end(kCases));
  cases.push_back({"chunks", {8, 64, 32, 32}, {8, 64, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 1});
  std::vector<bool> forced{true};
  if (simd_level() >= SimdLevel::kAvx2) forced.push_back(false);
  uint64_t seed = 400;
  for (const ConvCase& cc : cases) {
    SCOPED_TRACE(cc.name);
    const auto in = conv_inputs(cc, seed += 3);
    Shape ys;
    const auto y_want =
        naive_conv(cc, vals(in[0]), vals(in[1]), cc.bias ? vals(in[2]) : std::vector<double>{}, ys);
    const Tensor gy = rnd(ys, kFloat64, seed + 1);
    const std::vector<double> x = vals(in[0]), w = vals(in[1]), g = vals(gy);
    const int64_t N = cc.x[0], C = cc.x[1], H = cc.x[2], W = cc.x[3];
    const int64_t O = cc.w[0], icg = cc.w[1], KH = cc.w[2], KW = cc.w[3], OH = ys[2], OW = ys[3];
    std::vector<long double> gx(x.size()), gw(w.size()), gb(O);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < O; ++o)
        for (int64_t i = 0; i < OH; ++i)
          for (int64_t j = 0; j < OW; ++j) {
            const double go = g[((n * O + o) * OH + i) * OW + j];
            gb[o] += go;
            const int64_t grp = o / (O / cc.groups);
            for (int64_t c = 0; c < icg; ++c)
              for (int64_t ky = 0; ky < KH; ++ky)
                for (int64_t kx = 0; kx < KW; ++kx) {
                  const int64_t yy = i * cc.stride[0] - cc.padding[0] + ky * cc.dilation[0];
                  const int64_t xx = j * cc.stride[1] - cc.padding[1] + kx * cc.dilation[1];
                  if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
                  const int64_t xi = ((n * C + grp * icg + c) * H + yy) * W + xx;
                  const int64_t wi = ((o * icg + c) * KH + ky) * KW + kx;
                  gx[xi] += static_cast<long double>(go) * w[wi];
                  gw[wi] += static_cast<long double>(go) * x[xi];
                }
          }
    for (bool f : forced) {
      SCOPED_TRACE(f ? "reference GEMM" : "AVX2 GEMM");
      kernels::gemm_f64_reference_forced() = f;
      std::vector<Tensor> leaves;
      for (const Tensor& t : in)
        leaves.push_back(t.defined() ? t.detach().requires_grad_(true) : t);
      const Tensor y = conv_fn(cc)(leaves);
      expect_near_all(vals(y), y_want, 1e-12);
      y.backward(gy);
      // Sums of up to N * OH * OW (8192) products of O(1) values.
      expect_near_all(vals(leaves[0].grad()), std::vector<double>(gx.begin(), gx.end()), 1e-12);
      expect_near_all(vals(leaves[1].grad()), std::vector<double>(gw.begin(), gw.end()), 1e-11);
      if (cc.bias)
        expect_near_all(vals(leaves[2].grad()), std::vector<double>(gb.begin(), gb.end()), 1e-11);
      kernels::gemm_f64_reference_forced() = false;
    }
  }
}

TEST(Conv2d, GradcheckEveryParameterClassF64) {
  uint64_t seed = 100;
  for (const ConvCase& cc : kCases) {
    SCOPED_TRACE(cc.name);
    expect_gradcheck(conv_fn(cc), conv_inputs(cc, seed += 3));
  }
}

TEST(Conv2d, LowPrecisionMatchesF64) {
  uint64_t seed = 200;
  for (const ConvCase& cc : {kCases[1], kCases[2], kCases[4], kCases[5], kCases[7]}) {
    SCOPED_TRACE(cc.name);
    const auto in = conv_inputs(cc, seed += 3);
    // Sums of up to 27 products of O(1) values: an output rounding plus accumulation error.
    expect_matches_f64(conv_fn(cc), in, kFloat32, 2e-5, 1e-5);
    expect_matches_f64(conv_fn(cc), in, kFloat16, 1e-2, 4e-3);
    expect_matches_f64(conv_fn(cc), in, kBFloat16, 6e-2, 1.6e-2);
  }
}

// The bf16 oneDNN kernels against the f32 ones on identical (bf16-representable) values: both
// accumulate in fp32, so the bf16 result is the f32 result rounded once (within one bf16 ulp
// for the rare accumulation-order tie).
TEST(Conv2d, Bf16PathMatchesF32Path) {
  const ConvCase cc{"net", {4, 8, 9, 9}, {16, 8, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 1};
  std::vector<Tensor> b16, f32;
  uint64_t seed = 300;
  for (const Shape& s : {cc.x, cc.w, Shape{cc.w[0]}}) {
    Tensor t = rnd(s, kBFloat16, ++seed);
    b16.push_back(t.clone().requires_grad_(true));
    f32.push_back(t.to(kFloat32).detach().requires_grad_(true));
  }
  const Tensor yb = conv_fn(cc)(b16), yf = conv_fn(cc)(f32);
  ASSERT_EQ(yb.dtype(), kBFloat16);
  const auto vb = vals(yb), vf = vals(yf);
  for (size_t i = 0; i < vb.size(); ++i)
    EXPECT_NEAR(vb[i], vf[i], std::abs(vf[i]) * std::ldexp(1.0, -8) + 1e-6) << i;
  const Tensor g = rnd(yf.shape(), kBFloat16, 399);
  yb.backward(g);
  yf.backward(g.to(kFloat32));
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(b16[k].grad().dtype(), kBFloat16);
    const auto gb = vals(b16[k].grad()), gf = vals(f32[k].grad());
    for (size_t i = 0; i < gb.size(); ++i)
      EXPECT_NEAR(gb[i], gf[i], std::abs(gf[i]) * std::ldexp(1.0, -7) + 1e-4)
          << "input " << k << " element " << i;
  }
}

// Where a low dtype is widened to f32 for oneDNN (f16 always, bf16 without AVX-512), the
// result must be exactly the f32 convolution of the widened values rounded once (RNE): bit for
// bit, forward and every gradient, over every parameter class (padding, stride, odd sizes,
// dilation, groups, no bias), and with whole channel blocks, where the widening and rounding
// happen in one pass with the layout reorders (blocked_convert.h; oneDNN 2.6's own converting
// reorders were tried first and removed: its generic reorder made a bf16-mixed CNN step 11x
// slower on AVX2; docs/performance.md).
TEST(Conv2d, WidenedLowPrecisionIsTheF32PathRoundedOnce) {
  std::vector<DType> widened{kFloat16};
  if (!kernels::onednn_supports_bf16()) widened.push_back(kBFloat16);
  uint64_t seed = 500;
  for (const ConvCase& cc : kCases) {
    SCOPED_TRACE(cc.name);
    for (DType dt : widened) {
      SCOPED_TRACE(dt.name());
      std::vector<Tensor> low, f32;
      for (const Shape& s : {cc.x, cc.w, Shape{cc.w[0]}}) {
        const Tensor t = rnd(s, dt, ++seed);
        low.push_back(t.clone().requires_grad_(true));
        f32.push_back(t.to(kFloat32).detach().requires_grad_(true));
      }
      if (!cc.bias) {
        low.pop_back();
        f32.pop_back();
      }
      const Tensor yl = conv_fn(cc)(low), yf = conv_fn(cc)(f32);
      ASSERT_EQ(yl.dtype(), dt);
      EXPECT_EQ(vals(yl), vals(yf.to(dt)));
      const Tensor g = rnd(yf.shape(), dt, ++seed);
      yl.backward(g);
      yf.backward(g.to(kFloat32));
      for (size_t k = 0; k < low.size(); ++k) {
        ASSERT_EQ(low[k].grad().dtype(), dt);
        EXPECT_EQ(vals(low[k].grad()), vals(f32[k].grad().to(dt))) << "input " << k;
      }
    }
  }
}

TEST(Conv2d, AutocastRunsInBf16AndWeightGradientIsFp32) {
  Tensor x = rnd({2, 3, 6, 6}, kFloat32, 401);
  Tensor w = rnd({4, 3, 3, 3}, kFloat32, 402).requires_grad_(true);
  Tensor b = rnd({4}, kFloat32, 403).requires_grad_(true);
  Tensor y;
  {
    amp::autocast ac;  // CPU, bf16
    y = conv2d(x, w, b, {1, 1}, {1, 1});
  }
  EXPECT_EQ(y.dtype(), kBFloat16);
  y.to(kFloat32).backward(ones(y.shape(), kFloat32));
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(b.grad().dtype(), kFloat32);
  // Against the f32 computation on the bf16-rounded operands.
  Tensor w2 = w.detach().to(kBFloat16).to(kFloat32).requires_grad_(true);
  Tensor y2 = conv2d(x.to(kBFloat16).to(kFloat32), w2, b.detach().to(kBFloat16).to(kFloat32),
                     {1, 1}, {1, 1});
  y2.backward(ones(y2.shape(), kFloat32));
  const auto g1 = vals(w.grad()), g2 = vals(w2.grad());
  for (size_t i = 0; i < g1.size(); ++i) EXPECT_NEAR(g1[i], g2[i], 0.02 * std::abs(g2[i]) + 1e-3);
  // dbias = number of output positions (all-ones upstream gradient): exact.
  for (double v : vals(b.grad())) EXPECT_EQ(v, 2.0 * 36.0);
}

TEST(Conv2d, PrimitivesAreCachedPerShape) {
  kernels::onednn_conv_clear_cache();
  const Tensor x = rnd({1, 2, 5, 5}, kFloat32, 501), w = rnd({3, 2, 3, 3}, kFloat32, 502);
  conv2d(x, w);
  EXPECT_EQ(kernels::onednn_conv_cache_size(), 1u);
  conv2d(x, w);
  EXPECT_EQ(kernels::onednn_conv_cache_size(), 1u);
  conv2d(x, w, Tensor(), {2, 2});
  EXPECT_EQ(kernels::onednn_conv_cache_size(), 2u);
}

TEST(Conv2d, BadInputsNameTheShapes) {
  const Tensor x = rnd({2, 3, 5, 5}, kFloat32, 1), w = rnd({4, 2, 3, 3}, kFloat32, 2);
  expect_error([&] { conv2d(x, w); },
               {"[conv2d]", "in-channels mismatch", "[2, 3, 5, 5]", "[4, 2, 3, 3]"});
  expect_error(
      [&] {
        conv2d(x, rnd({4, 3, 3, 3}, kFloat32, 3), rnd({3}, kFloat32, 4));
      },
      {"bias must have shape [4]", "[3]"});
  expect_error([&] { conv2d(x.flatten(0, 1), w); }, {"4-D input", "[6, 5, 5]"});
  expect_error(
      [&] {
        conv2d(x, rnd({4, 3, 3, 3}, kBFloat16, 3));
      },
      {"share a dtype", "float32", "bfloat16"});
  expect_error(
      [&] {
        conv2d(x, rnd({4, 3, 7, 7}, kFloat32, 3));
      },
      "smaller than the dilated kernel");
  expect_error(
      [&] {
        conv2d(x, rnd({3, 1, 3, 3}, kFloat32, 3), Tensor(), {1, 1}, {0, 0}, {1, 1}, 2);
      },
      "not divisible by groups=2");
  expect_error(
      [&] {
        conv2d(x, rnd({4, 3, 3, 3}, kFloat32, 3), Tensor(), {0, 1});
      },
      "must be positive");
}

}  // namespace
}  // namespace mantissa
