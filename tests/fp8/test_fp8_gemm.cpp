// The FP8 GEMM: exact emulation of an FP8 product with fp32 accumulation. Against an fp64
// reference of the dequantised operands it must agree to fp32 accumulation error; with
// power-of-two scales (dequantisation exact) it must equal the fp32 product of the dequantised
// operands bit for bit, in every transpose combination, when that product runs on the same
// GEMM (the native one: on AVX2 the FP8 GEMM decodes its codes inside the native GEMM's
// packing, kernels/cpu/gemm/gemm_lowbit.h).
#include "mantissa/fp8/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/cpu/gemm/gemm_backend.h"
#include "mantissa/ops/matmul.h"

namespace mantissa::fp8 {
namespace {

Tensor random_tensor(const Shape& shape, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(numel_of(shape)));
  for (auto& x : v) x = nd(rng);
  return tensor(v, shape);
}

TEST(Fp8Gemm, MatchesFp64ReferenceOfDequantisedOperands) {
  const int64_t m = 37, n = 29, k = 300;
  const QuantizeResult a = quantize(random_tensor({m, k}, 3.0f, 1), kFloat8_e4m3fn, 30.0f);
  const QuantizeResult b = quantize(random_tensor({n, k}, 0.05f, 2), kFloat8_e5m2, 5000.0f);
  const Tensor bias = random_tensor({n}, 1.0f, 3);
  const Tensor da = dequantize(a.q), db = dequantize(b.q);
  const Tensor y = fp8_gemm(a.q, false, b.q, true, bias);
  const float* pa = da.data<float>();
  const float* pb = db.data<float>();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double ref = bias.data<float>()[j], mag = std::fabs(ref);
      for (int64_t t = 0; t < k; ++t) {
        ref += static_cast<double>(pa[i * k + t]) * pb[j * k + t];
        mag += std::fabs(static_cast<double>(pa[i * k + t]) * pb[j * k + t]);
      }
      // fp32 accumulation over k terms, the epilogue's two roundings and the rounding of the
      // dequantised operands' scale_inv product.
      const double tol = (k + 4) * std::ldexp(1.0, -24) * mag + 1e-30;
      ASSERT_NEAR(y.data<float>()[i * n + j], ref, tol) << i << "," << j;
    }
  }
}

TEST(Fp8Gemm, PowerOfTwoScalesEqualFp32ProductOfDequantisedOperands) {
  // Same kernel, same order of fp32 FMAs for the FP8 GEMM and the reference products.
  const kernels::GemmBackend saved = kernels::gemm_backend();
  kernels::set_gemm_backend(kernels::GemmBackend::kNative);
  const int64_t m = 19, n = 24, k = 65;
  const Tensor x = random_tensor({m, k}, 2.0f, 4), w = random_tensor({n, k}, 0.3f, 5);
  const QuantizeResult a = quantize(x, kFloat8_e4m3fn, 64.0f);
  const QuantizeResult b = quantize(w, kFloat8_e4m3fn, 512.0f);
  const QuantizeResult at = quantize(x.t().contiguous(), kFloat8_e5m2, 0.25f);
  const QuantizeResult bt = quantize(w.t().contiguous(), kFloat8_e4m3fn, 512.0f);
  const Tensor da = dequantize(a.q), db = dequantize(b.q);
  const Tensor dat = dequantize(at.q), dbt = dequantize(bt.q);
  const Tensor want_nt = matmul(da, db.t());
  EXPECT_TRUE(fp8_gemm(a.q, false, b.q, true).to_vector<float>() == want_nt.to_vector<float>());
  const Tensor want_tn = matmul(dat.t(), dbt);
  EXPECT_TRUE(fp8_gemm(at.q, true, bt.q, false).to_vector<float>() == want_tn.to_vector<float>());
  const Tensor want_nn = matmul(da, dbt);
  EXPECT_TRUE(fp8_gemm(a.q, false, bt.q, false).to_vector<float>() == want_nn.to_vector<float>());
  const Tensor want_tt = matmul(dat.t(), db.t());
  EXPECT_TRUE(fp8_gemm(at.q, true, b.q, true).to_vector<float>() == want_tt.to_vector<float>());
  kernels::set_gemm_backend(saved);
}

TEST(Fp8Gemm, OutputDtypeRoundsOnceAndShapesAreChecked) {
  const QuantizeResult a = quantize(random_tensor({4, 8}, 1.0f, 6), kFloat8_e4m3fn, 1.0f);
  const QuantizeResult b = quantize(random_tensor({3, 8}, 1.0f, 7), kFloat8_e4m3fn, 1.0f);
  const Tensor y32 = fp8_gemm(a.q, false, b.q, true);
  const Tensor y16 = fp8_gemm(a.q, false, b.q, true, Tensor(), kBFloat16);
  EXPECT_EQ(y16.dtype(), kBFloat16);
  EXPECT_EQ(y16.to_vector<float>(), y32.to(kBFloat16).to_vector<float>());
  EXPECT_THROW(fp8_gemm(a.q, false, b.q, false), Error);
}

TEST(Fp8Quantize, ScaleInvIsTheRoundedReciprocal) {
  const QuantizeResult r = quantize(random_tensor({5}, 1.0f, 8), kFloat8_e4m3fn, 3.0f);
  EXPECT_EQ(r.q.scale_inv, 1.0f / 3.0f);
  EXPECT_EQ(r.q.dtype(), kFloat8_e4m3fn);
  EXPECT_EQ(r.counts.total, 5);
  EXPECT_THROW(quantize(random_tensor({5}, 1.0f, 8).to(kFloat64), kFloat8_e4m3fn, 1.0f), Error);
}

}  // namespace
}  // namespace mantissa::fp8
