// LLM.int8: row-wise quantization against the documented vectors and bitsandbytes' output, the
// int8 GEMM levels, the mixed product against an fp64 reference, and Linear8bitLt.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "kernels/cpu/quant/int8_rowwise.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/generator.h"
#include "mantissa/gemm/gemm.h"
#include "mantissa/nn/linear.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/quant/int8.h"
#include "mantissa/quant/linear8bit.h"
#include "quant/quant_fixtures.h"

namespace mantissa::quant {
namespace {

using namespace testing;
namespace kq = kernels::quant;

TEST(Int8Rows, DocumentedVectors) {
  const Tensor row = tensor(std::vector<float>{1, -2, 0.5, 7, 3}, {1, 5});
  const Int8Rows a = quantize_int8_rows(row, 6.0f);
  EXPECT_EQ(a.outlier_cols, std::vector<int64_t>{3});
  EXPECT_EQ(a.absmax.to_vector<float>(), std::vector<float>{3});
  EXPECT_EQ(values_of<int8_t>(a.codes), (std::vector<int8_t>{42, -85, 21, 0, 127}));
  const Int8Rows b = quantize_int8_rows(row, 0.0f);
  EXPECT_TRUE(b.outlier_cols.empty());
  EXPECT_EQ(b.absmax.to_vector<float>(), std::vector<float>{7});
  EXPECT_EQ(values_of<int8_t>(b.codes), (std::vector<int8_t>{18, -36, 9, 127, 54}));
  // A zero row gives zeros, not NaN casts.
  const Int8Rows z = quantize_int8_rows(zeros({2, 3}), 0.0f);
  EXPECT_EQ(values_of<int8_t>(z.codes), std::vector<int8_t>(6, 0));
}

TEST(Int8Rows, MatchesBitsandbytes) {
  const auto fx = load_fixture("int8_rowwise.safetensors");
  for (int thr : {0, 6}) {
    const std::string p = "t" + std::to_string(thr) + ".";
    const Int8Rows r = quantize_int8_rows(fx.at("a"), static_cast<float>(thr));
    EXPECT_EQ(values_of<int8_t>(r.codes), values_of<int8_t>(fx.at(p + "codes"))) << thr;
    EXPECT_EQ(bits_of(r.absmax), bits_of(fx.at(p + "absmax"))) << thr;
    if (thr) EXPECT_EQ(r.outlier_cols, values_of<int64_t>(fx.at(p + "cols")));
  }
}

// bitsandbytes scales a row by the float32 reciprocal of its absmax times 127 (two roundings),
// then rounds half to even. Here x * that factor is exactly 46.5 in float32 (code 46), while x *
// 127 / absmax is 46.500004 (and a correctly rounded 127 / absmax gives 47): the order decides
// the stored code, on every level.
TEST(Int8Rows, ScaleTieRoundsHalfToEvenInBitsandbytesOrder) {
  const float m = 0x1.d0798ep-1f, x = 0x1.542094p-2f;
  const float factor = (1.0f / m) * 127.0f;
  ASSERT_EQ(x * factor, 46.5f);                         // a tie in bitsandbytes' order
  ASSERT_NE(x * (127.0f / m), 46.5f);                   // not with one rounding
  ASSERT_GT(static_cast<double>(x) * 127.0 / m, 46.5);  // nor exactly
  const std::vector<float> row = {m, x, -x, 0.0f, m, -m};
  const std::vector<int8_t> want = {127, 46, -46, 0, 127, -127};
  for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, simd_level()}) {
    std::vector<int8_t> codes(row.size(), 99);
    float absmax = 0.0f;
    kq::int8_rowwise_quantize(row.data(), 1, static_cast<int64_t>(row.size()), 0.0f, codes.data(),
                              &absmax, nullptr, level);
    EXPECT_EQ(codes, want) << "level " << static_cast<int>(level);
    EXPECT_EQ(absmax, m);
  }
  if (simd_level() >= SimdLevel::kAvx512) {
    std::vector<int8_t> codes(row.size(), 99);
    kq::int8_quantize_row_avx512(row.data(), static_cast<int64_t>(row.size()), 0.0f, nullptr,
                                 codes.data());
    EXPECT_EQ(codes, want);
  }
}

// bitsandbytes' codes (scripts/make_int8_scale_fixture.py) for rows on which the two orders of
// the row factor round differently: rows of seeded Linear(784, 257) weights, and constructed
// ties with and without an outlier column (threshold 6), on every level.
TEST(Int8Rows, ScaleTiesMatchBitsandbytes) {
  const auto fx = load_fixture("int8_scale_ties.safetensors");
  for (const char* set : {"linear", "ties", "ties6"}) {
    const std::string p = std::string(set) + ".";
    const float thr = p == "ties6." ? 6.0f : 0.0f;
    const Tensor a = fx.at(p + "a").contiguous();
    const std::vector<int8_t> want = values_of<int8_t>(fx.at(p + "codes"));
    for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, simd_level()}) {
      std::vector<int8_t> codes(want.size(), 99);
      std::vector<float> absmax(static_cast<size_t>(a.size(0)));
      kq::int8_rowwise_quantize(a.data<float>(), a.size(0), a.size(1), thr, codes.data(),
                                absmax.data(), nullptr, level);
      EXPECT_EQ(codes, want) << set << " level " << static_cast<int>(level);
      EXPECT_EQ(0, std::memcmp(absmax.data(), fx.at(p + "absmax").data_ptr(), absmax.size() * 4))
          << set;
    }
  }
}

// The AVX-512 row (masked tails, outlier and zero-column masks, VCVTPS2DQ rounding) writes the
// scalar row's bytes and absmax: ragged widths, thresholds 0 and 6, ties at .5, NaN, inf, a row
// of zeros, a row whose every element is an outlier.
// The AVX2 and AVX-512 rows give the scalar row's codes and absmax.
TEST(Int8Rows, SimdRowsMatchScalar) {
  if (simd_level() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  Generator g(23);
  for (int64_t cols :
       {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{100}}) {
    for (float thr : {0.0f, 6.0f}) {
      for (int kind = 0; kind < 5; ++kind) {
        std::vector<float> r(static_cast<size_t>(cols));
        for (auto& v : r) v = (static_cast<float>(g.below(2001)) - 1000.0f) / 100.0f;
        if (kind == 1) r[0] = NAN;
        if (kind == 2) r[cols - 1] = INFINITY;
        if (kind == 3) std::fill(r.begin(), r.end(), 0.0f);
        if (kind == 4) std::fill(r.begin(), r.end(), 7.0f);
        if (cols > 2) r[1] = 63.5f / 127.0f * 9.99f;  // lands near a tie after scaling
        std::vector<uint8_t> zero(static_cast<size_t>(cols));
        for (auto& z : zero) z = g.below(4) == 0;
        for (const uint8_t* zc :
             {static_cast<const uint8_t*>(nullptr), static_cast<const uint8_t*>(zero.data())}) {
          std::vector<int8_t> a(r.size(), 99), b(r.size(), 99), c(r.size(), 99);
          const float ma = kq::int8_quantize_row_scalar(r.data(), cols, thr, zc, a.data());
          const float mb = kq::int8_quantize_row_avx2(r.data(), cols, thr, zc, b.data());
          EXPECT_EQ(a, b) << "avx2 " << cols << " thr " << thr << " kind " << kind;
          EXPECT_EQ(std::memcmp(&ma, &mb, 4), 0) << ma << " vs " << mb;
          if (simd_level() < SimdLevel::kAvx512) continue;  // AVX-512: checked where present
          const float mc = kq::int8_quantize_row_avx512(r.data(), cols, thr, zc, c.data());
          EXPECT_EQ(a, c) << "avx512 " << cols << " thr " << thr << " kind " << kind;
          EXPECT_EQ(std::memcmp(&ma, &mc, 4), 0) << ma << " vs " << mc;
        }
      }
    }
  }
}

// The whole matrix (outlier columns flagged over all rows, then each row) at this CPU's level
// against the scalar level: the same codes, absmax and outlier columns, NaN and inf included.
TEST(Int8Rows, SimdMatrixMatchesScalar) {
  Generator g(29);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 9}, {3, 17}, {64, 100}, {300, 130}}) {
    std::vector<float> a(static_cast<size_t>(rows * cols));
    for (auto& v : a) v = (static_cast<float>(g.below(2001)) - 1000.0f) / 160.0f;  // |a| < 6.3
    a[static_cast<size_t>(cols / 2)] = NAN;
    a[a.size() - 1] = -INFINITY;
    std::vector<int8_t> c0(a.size()), c1(a.size());
    std::vector<float> m0(static_cast<size_t>(rows)), m1(m0.size());
    std::vector<int64_t> o0, o1;
    kq::int8_rowwise_quantize(a.data(), rows, cols, 6.0f, c0.data(), m0.data(), &o0,
                              SimdLevel::kScalar);
    kq::int8_rowwise_quantize(a.data(), rows, cols, 6.0f, c1.data(), m1.data(), &o1);
    EXPECT_FALSE(o0.empty()) << rows << " x " << cols;
    EXPECT_EQ(o0, o1) << rows << " x " << cols;
    EXPECT_EQ(c0, c1) << rows << " x " << cols;
    EXPECT_EQ(0, std::memcmp(m0.data(), m1.data(), m0.size() * sizeof(float)));
  }
}

// A bfloat16 or float16 matrix quantizes as its values widened to float32 do: the same codes,
// absmax and outlier columns, at the scalar level and this CPU's, on sizes with and without
// threads, NaN and inf included; quantize_int8_rows takes that path for a half tensor.
TEST(Int8Rows, HalfMatrixQuantizesAsItsFloat32Values) {
  Generator g(31);
  for (DType half : {kBFloat16, kFloat16}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 9}, {3, 17}, {300, 130}}) {
      Tensor x = empty({rows, cols}, kFloat32);
      float* p = x.data<float>();
      for (int64_t i = 0; i < x.numel(); ++i)
        p[i] = (static_cast<float>(g.below(2001)) - 1000.0f) / 160.0f;  // |x| < 6.3
      p[cols / 2] = NAN;
      p[x.numel() - 1] = -INFINITY;
      const Tensor h = x.to(half);
      const Tensor w = h.to(kFloat32);
      const std::vector<uint16_t> hv = values_of<uint16_t>(h);
      for (SimdLevel level : {SimdLevel::kScalar, simd_level()}) {
        std::vector<int8_t> c0(hv.size()), c1(hv.size());
        std::vector<float> m0(static_cast<size_t>(rows)), m1(m0.size());
        std::vector<int64_t> o0, o1;
        kq::int8_rowwise_quantize(w.data<float>(), rows, cols, 6.0f, c0.data(), m0.data(), &o0,
                                  level);
        kq::int8_rowwise_quantize_half(hv.data(), half, rows, cols, 6.0f, c1.data(), m1.data(), &o1,
                                       level);
        EXPECT_EQ(o0, o1) << half.name() << " " << rows << " x " << cols;
        EXPECT_EQ(c0, c1) << half.name() << " " << rows << " x " << cols;
        EXPECT_EQ(0, std::memcmp(m0.data(), m1.data(), m0.size() * sizeof(float)));
      }
      const Int8Rows a = quantize_int8_rows(h, 6.0f), b = quantize_int8_rows(w, 6.0f);
      EXPECT_EQ(a.outlier_cols, b.outlier_cols);
      EXPECT_EQ(values_of<int8_t>(a.codes), values_of<int8_t>(b.codes));
      EXPECT_EQ(bits_of(a.absmax), bits_of(b.absmax));
    }
  }
}

// A NaN among a row's non-outliers makes its absmax NaN, an infinite one leaves it infinite, and
// both rows get 0 codes (not a NaN cast to int8): the row scale then carries the non-finite
// value to every output of the row, at every level.
TEST(Int8Rows, NonFiniteRowsKeepANonFiniteScale) {
  for (SimdLevel level : {SimdLevel::kScalar, simd_level()}) {
    const std::vector<float> a = {1, NAN, -2, 4, /**/ 1, -2, INFINITY, 3, /**/ 1, -2, 0.5f, 3};
    std::vector<int8_t> codes(a.size(), 99);
    std::vector<float> absmax(3);
    kq::int8_rowwise_quantize(a.data(), 3, 4, 0.0f, codes.data(), absmax.data(), nullptr, level);
    EXPECT_TRUE(std::isnan(absmax[0]));
    EXPECT_EQ(absmax[1], INFINITY);
    EXPECT_EQ(absmax[2], 3.0f);
    EXPECT_EQ(codes, (std::vector<int8_t>{0, 0, 0, 0, 0, 0, 0, 0, 42, -85, 21, 127}));
    // With a threshold the infinity is an outlier (its column goes through fp32), NaN is not.
    kq::int8_rowwise_quantize(a.data(), 3, 4, 6.0f, codes.data(), absmax.data(), nullptr, level);
    EXPECT_TRUE(std::isnan(absmax[0]));
    EXPECT_EQ(absmax[1], 3.0f);
  }
}

// A NaN or inf input makes its row of a Linear8bitLt's output non-finite, as in nn::Linear, in
// both modes and with and without the outlier threshold; the other rows are untouched.
TEST(Linear8bitLt, NonFiniteInputsPropagateToTheirRow) {
  NoGradGuard no_grad;
  nn::Linear lin(16, 4);
  for (Int8Mode mode : {Int8Mode::kInference, Int8Mode::kTraining}) {
    for (float thr : {0.0f, 6.0f}) {
      auto q = Linear8bitLt::from_linear(lin, {mode, thr, kFloat32});
      manual_seed(5);
      Tensor x = randn({3, 16});
      x.data<float>()[2] = NAN;
      x.data<float>()[16 + 7] = INFINITY;
      const std::vector<float> y = q->forward(x).to_vector<float>();
      const std::vector<float> ref = lin.forward(x).to_vector<float>();
      for (int j = 0; j < 4; ++j) {
        EXPECT_TRUE(std::isnan(y[j])) << "row 0, " << j << " thr " << thr;
        EXPECT_FALSE(std::isfinite(y[4 + j])) << "row 1, " << j << " thr " << thr;
        EXPECT_TRUE(std::isfinite(y[8 + j])) << "row 2, " << j;
        EXPECT_NEAR(y[8 + j], ref[8 + j], 0.05) << "row 2, " << j;
      }
    }
  }
}

TEST(Int8Gemm, Avx2MatchesScalar) {
  if (simd_level() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  Generator g(9);
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                         {5, 7, 33},
                         {9, 3, 64},
                         {4, 16, 300},
                         {70, 101, 17},  // row and column blocks with partial tiles
                         {131, 200, 784},
                         {97, 129, 513},       // odd k: the last pair half padding
                         {200, 300, 1030}}) {  // several k blocks summed into c
    std::vector<int8_t> a(m * k), b(n * k);
    for (auto& v : a) v = static_cast<int8_t>(static_cast<int>(g.below(256)) - 128);
    for (auto& v : b) v = static_cast<int8_t>(static_cast<int>(g.below(256)) - 128);
    a[0] = -128;  // the extreme products: (-128)^2 pairs sum to 32768, past int16
    b[0] = -128;
    std::vector<int32_t> s(m * n), v(m * n);
    kq::int8_gemm_nt(a.data(), b.data(), m, n, k, s.data(), SimdLevel::kScalar);
    kq::int8_gemm_nt(a.data(), b.data(), m, n, k, v.data(), SimdLevel::kAvx2);
    EXPECT_EQ(s, v) << m << "x" << n << "x" << k;
  }
}

// The VNNI path (oneDNN s8 x s8 -> s32: VPDPBUSD with its unsigned-shift compensation, or AMX-INT8)
// equals the scalar sums exactly: whole and partial tiles, k below, at and above 64 with ragged
// tails, and the extreme codes -128/-127/127 where an unsigned shift or a saturating instruction
// would go wrong.
TEST(Int8Gemm, VnniPathMatchesScalar) {
  if (simd_level() < SimdLevel::kAvx512 || !cpu_features().avx512_vnni)
    GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  Generator g(19);
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                         {5, 7, 33},
                         {4, 4, 64},
                         {9, 3, 65},
                         {8, 16, 300},
                         {64, 40, 784},
                         {13, 9, 2048}}) {
    std::vector<int8_t> a(m * k), b(n * k);
    for (auto& v : a) v = static_cast<int8_t>(static_cast<int>(g.below(256)) - 128);
    for (auto& v : b) v = static_cast<int8_t>(static_cast<int>(g.below(256)) - 128);
    a[0] = -128;
    b[0] = -128;
    if (k > 1) {
      a[1] = 127;
      b[1] = -127;
    }
    std::vector<int32_t> s(m * n), v(m * n, 12345);
    kq::int8_gemm_nt(a.data(), b.data(), m, n, k, s.data(), SimdLevel::kScalar);
    kq::int8_gemm_nt(a.data(), b.data(), m, n, k, v.data(), SimdLevel::kAvx512);
    EXPECT_EQ(s, v) << m << "x" << n << "x" << k;
  }
  // Every code of -128..127 against every other: all 65536 products in one k = 256 dot product
  // per row pair.
  std::vector<int8_t> a(256 * 256), b(256 * 256);
  for (int i = 0; i < 256; ++i)
    for (int p = 0; p < 256; ++p) {
      a[i * 256 + p] = static_cast<int8_t>(i - 128);
      b[i * 256 + p] = static_cast<int8_t>(p - 128);
    }
  std::vector<int32_t> s(256 * 256), v(256 * 256);
  kq::int8_gemm_nt(a.data(), b.data(), 256, 256, 256, s.data(), SimdLevel::kScalar);
  kq::int8_gemm_nt(a.data(), b.data(), 256, 256, 256, v.data(), SimdLevel::kAvx512);
  EXPECT_EQ(s, v);
}

// The mixed product against fp64 arithmetic on the same quantized operands, with and without
// outlier columns.
TEST(Int8Linear, MatchesFp64ReferenceWithAndWithoutOutliers) {
  Generator g(10);
  const int64_t rows = 6, in = 48, out = 10;
  Tensor x = randn({rows, in}, kFloat32, &g);
  x.data<float>()[2 * in + 5] = 8.0f;    // column 5 holds an outlier
  x.data<float>()[4 * in + 17] = -6.5f;  // and column 17
  const Tensor w = randn({out, in}, kFloat32, &g) * 0.1;
  const Tensor b = randn({out}, kFloat32, &g);
  const QuantizedTensor qw = quantize_int8_weight(w);
  for (float thr : {0.0f, 6.0f}) {
    const Int8Rows qa = quantize_int8_rows(x, thr);
    EXPECT_EQ(qa.outlier_cols.size(), thr > 0 ? 2u : 0u);
    const auto y = int8_linear_nograd(x, qw.data, qw.absmax, b, thr).to_vector<float>();
    const auto ca = values_of<int8_t>(qa.codes), cb = values_of<int8_t>(qw.data);
    const auto sa = qa.absmax.to_vector<float>(), sb = qw.absmax.to_vector<float>();
    const auto xv = x.to_vector<float>(), bv = b.to_vector<float>();
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < out; ++j) {
        double ref = bv[j];
        for (int64_t c = 0; c < in; ++c) {
          const bool outlier =
              std::find(qa.outlier_cols.begin(), qa.outlier_cols.end(), c) != qa.outlier_cols.end();
          const double wq = static_cast<double>(cb[j * in + c]) * sb[j] / 127.0;
          ref += outlier ? xv[i * in + c] * wq
                         : static_cast<double>(ca[i * in + c]) * sa[i] / 127.0 * wq;
        }
        EXPECT_NEAR(y[i * out + j], ref, 1e-4 * (1 + std::fabs(ref))) << i << "," << j;
      }
    }
  }
}

// A half output is the float32 product's output rounded once, outlier columns and bias included,
// and a bf16 input's int8 Linear gives those bits.
TEST(Int8Linear, HalfOutputIsTheFloat32OutputRounded) {
  Generator g(12);
  const int64_t rows = 7, in = 40, out = 33;
  Tensor x = randn({rows, in}, kFloat32, &g);
  x.data<float>()[3 * in + 9] = 7.0f;  // an outlier column
  const Tensor w = randn({out, in}, kFloat32, &g) * 0.1;
  const Tensor b = randn({out}, kFloat32, &g);
  const QuantizedTensor qw = quantize_int8_weight(w);
  const Tensor xb = x.to(kBFloat16);
  const Tensor y32 = int8_linear_nograd(xb.to(kFloat32), qw.data, qw.absmax, b, 6.0f);
  for (DType half : {kBFloat16, kFloat16}) {
    const Int8Rows qa = quantize_int8_rows(xb, 0.0f);
    gemm::Epilogue e32, eh;
    e32.bias = eh.bias = b;
    eh.out_dtype = half;
    const Tensor a32 = gemm::gemm(gemm::int8_rows(qa.codes, qa.absmax),
                                  gemm::int8_rows(qw.data, qw.absmax).t(), e32);
    const Tensor ah = gemm::gemm(gemm::int8_rows(qa.codes, qa.absmax),
                                 gemm::int8_rows(qw.data, qw.absmax).t(), eh);
    ASSERT_EQ(ah.dtype(), half);
    EXPECT_EQ(values_of<uint16_t>(ah), values_of<uint16_t>(a32.to(half))) << half.name();
  }
  const Tensor yb = int8_linear_nograd(xb, qw.data, qw.absmax, b, 6.0f);
  ASSERT_EQ(yb.dtype(), kBFloat16);
  EXPECT_EQ(values_of<uint16_t>(yb), values_of<uint16_t>(y32.to(kBFloat16)));
}

TEST(Linear8bitLt, StateDictKeysAndRoundTrip) {
  Generator g(12);
  nn::Linear lin(32, 8, true, kFloat32, &g);
  auto q = Linear8bitLt::from_linear(lin, {Int8Mode::kInference, 6.0f, kFloat32});
  EXPECT_EQ(q->state_dict().keys(),
            (std::vector<std::string>{"bias", "weight", "SCB", "weight_format"}));
  EXPECT_EQ(q->named_parameters().size(), 1u);
  EXPECT_EQ(q->weight.dtype(), kInt8);
  EXPECT_EQ(q->weight_stored_bytes(), 32 * 8 + 4 * 8);
  Linear8bitLt fresh(32, 8, true, {Int8Mode::kInference, 6.0f, kFloat32});
  fresh.load_state_dict(q->state_dict());
  EXPECT_EQ(values_of<int8_t>(fresh.weight), values_of<int8_t>(q->weight));
  EXPECT_EQ(bits_of(fresh.scb), bits_of(q->scb));
  auto t = Linear8bitLt::from_linear(lin, {Int8Mode::kTraining, 6.0f, kFloat32});
  EXPECT_EQ(t->state_dict().keys(), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(t->named_parameters().size(), 2u);
}

TEST(Linear8bitLt, GradientsMatchFiniteDifferences) {
  Generator g(13);
  for (Int8Mode mode : {Int8Mode::kInference, Int8Mode::kTraining}) {
    nn::Linear lin(24, 6, true, kFloat32, &g);
    auto q = Linear8bitLt::from_linear(lin, {mode, 6.0f, kFloat32});
    const Tensor x0 = randn({4, 24}, kFloat32, &g);
    const Tensor r = randn({4, 6}, kFloat32, &g);
    Tensor x = x0.clone().requires_grad_();
    sum(q->forward(x) * r).backward();
    // The product is linear in x through the dequantized weight except for the input
    // quantization; compare with grad_y W_dq exactly and with finite differences loosely.
    const auto gx = x.grad().to_vector<float>();
    const auto wd = q->dequantized_weight().to_vector<float>();
    const auto rv = r.to_vector<float>();
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t c = 0; c < 24; ++c) {
        double want = 0;
        for (int64_t j = 0; j < 6; ++j) want += rv[i * 6 + j] * wd[j * 24 + c];
        EXPECT_NEAR(gx[i * 24 + c], want, 1e-5);
      }
    auto loss = [&](const Tensor& xi) {
      NoGradGuard ng;
      return sum((q->forward(xi) * r).to(kFloat64)).item();
    };
    for (int64_t i = 0; i < x0.numel(); i += 11) {
      Tensor xp = x0.clone(), xm = x0.clone();
      xp.data<float>()[i] += 0.05f;
      xm.data<float>()[i] -= 0.05f;
      EXPECT_NEAR(gx[i], (loss(xp) - loss(xm)) / 0.1, 0.05) << i;
    }
    if (mode == Int8Mode::kTraining) {
      // grad_W = grad_y^T x.
      const auto gw = q->weight.grad().to_vector<float>();
      const auto xv = x0.to_vector<float>();
      for (int64_t j = 0; j < 6; ++j)
        for (int64_t c = 0; c < 24; ++c) {
          double want = 0;
          for (int64_t i = 0; i < 4; ++i) want += rv[i * 6 + j] * xv[i * 24 + c];
          EXPECT_NEAR(gw[j * 24 + c], want, 1e-5);
        }
    }
  }
}

// int8-training quantizes its weight once per change, not once per forward: a second forward
// of the same weight reuses the codes, an in-place write (an optimizer step) makes new ones,
// and either way the product equals one through a fresh quantization.
TEST(Linear8bitLt, TrainingCodesFollowTheWeight) {
  Generator g(16);
  nn::Linear lin(48, 12, true, kFloat32, &g);
  auto q = Linear8bitLt::from_linear(lin, {Int8Mode::kTraining, 0.0f, kBFloat16});
  const Tensor x = randn({5, 48}, kFloat32, &g);
  auto fresh_product = [&] {
    const Int8Rows r = quantize_int8_rows(q->weight, 0.0f);
    NoGradGuard ng;
    return linear_int8(x.to(kBFloat16), r.codes, r.absmax, q->bias.to(kBFloat16), 0.0f)
        .to(kFloat32);
  };
  auto forward = [&] {
    NoGradGuard ng;
    return q->forward(x).to(kFloat32);
  };
  const Tensor y1 = forward();
  EXPECT_EQ(bits_of(y1), bits_of(fresh_product()));
  EXPECT_EQ(bits_of(forward()), bits_of(y1));
  {
    NoGradGuard ng;
    q->weight.copy_(q->weight * -1.5f);  // in place, as an optimizer writes
  }
  const Tensor y2 = forward();
  EXPECT_EQ(bits_of(y2), bits_of(fresh_product()));
  EXPECT_NE(bits_of(y2), bits_of(y1));
}

// Under a bf16 compute dtype the weight's gradient is the fp32 sum of bf16 products of grad_y
// and x (bf16 values, exact products), so it equals the fp64 sum of those values to fp32
// rounding.
TEST(Linear8bitLt, TrainingWeightGradientSumsBf16OperandsInFp32) {
  Generator g(17);
  nn::Linear lin(40, 9, false, kFloat32, &g);
  auto q = Linear8bitLt::from_linear(lin, {Int8Mode::kTraining, 0.0f, kBFloat16});
  const Tensor x = randn({7, 40}, kFloat32, &g);
  const Tensor r = randn({7, 9}, kFloat32, &g);
  Tensor xi = x.clone().requires_grad_();
  sum(q->forward(xi) * r).backward();
  const Tensor gw = q->weight.grad();
  ASSERT_EQ(gw.dtype(), kFloat32);
  const auto xb = x.to(kBFloat16).to(kFloat32).to_vector<float>();
  const auto rb = r.to(kBFloat16).to(kFloat32).to_vector<float>();
  const auto got = gw.to_vector<float>();
  for (int64_t j = 0; j < 9; ++j)
    for (int64_t c = 0; c < 40; ++c) {
      double want = 0;
      for (int64_t i = 0; i < 7; ++i) want += double(rb[i * 9 + j]) * xb[i * 40 + c];
      EXPECT_NEAR(got[j * 40 + c], want, 1e-5 * (1 + std::abs(want))) << j << ", " << c;
    }
}

TEST(Linear8bitLt, ForwardCloseToFloatLayer) {
  Generator g(14);
  nn::Linear lin(64, 16, true, kFloat32, &g);
  const Tensor x = randn({8, 64}, kFloat32, &g);
  const auto want = lin.forward(x).to_vector<float>();
  for (DType cd : {kFloat16, kFloat32}) {
    auto q = Linear8bitLt::from_linear(lin, {Int8Mode::kInference, 6.0f, cd});
    const Tensor y = q->forward(x);
    EXPECT_EQ(y.dtype(), kFloat32);
    const auto got = y.to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 0.03);
  }
}

// As Linear4bit: inside an autocast region of its compute dtype it returns that dtype, with the
// values it gives elsewhere.
TEST(Linear8bitLt, ReturnsTheAutocastDtypeInsideARegionOfItsComputeDtype) {
  Generator g(15);
  nn::Linear lin(64, 16, true, kFloat32, &g);
  const Tensor x = randn({8, 64}, kFloat32, &g);
  for (Int8Mode mode : {Int8Mode::kInference, Int8Mode::kTraining}) {
    auto q = Linear8bitLt::from_linear(lin, {mode, 6.0f, kBFloat16});
    const Tensor plain = q->forward(x);
    EXPECT_EQ(plain.dtype(), kFloat32);
    amp::autocast region(DeviceType::kCPU, kBFloat16);
    const Tensor y = q->forward(x);
    ASSERT_EQ(y.dtype(), kBFloat16);
    EXPECT_EQ(y.to(kFloat32).to_vector<float>(), plain.to_vector<float>());
  }
}

}  // namespace
}  // namespace mantissa::quant
