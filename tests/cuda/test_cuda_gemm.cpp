// Matrix products of GPU tensors (cuBLASLt / cuBLAS) against the CPU's float64 product of the
// same values: every dtype, float32 with and without TF32, transposed views, odd sizes,
// batches with broadcasting, the fused bias, and linear's forward and backward. They skip
// without a GPU. CudaGemmSpeed.Bf16At4096 prints a throughput and asserts nothing about it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "mantissa/core/cuda.h"
#include "mantissa/core/tensor.h"
#include "mantissa/ops/linear.h"
#include "mantissa/ops/matmul.h"
#include "mantissa/ops/matmul_precision.h"

namespace mantissa {
namespace {
using cuda_test::kGpu;
using cuda_test::randn_cpu;
using cuda_test::rel_error;

// The reference: the CPU product, in float64, of the values the GPU multiplies.
Tensor reference(const Tensor& a, const Tensor& b) {
  return matmul(a.cpu().to(kFloat64), b.cpu().to(kFloat64));
}

struct Case {
  DType dtype;
  Float32MatmulPrecision precision;
  double tol;
  const char* name;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {kFloat32, Float32MatmulPrecision::kHighest, 1e-5, "float32 (highest)"},
      {kFloat32, Float32MatmulPrecision::kHigh, 5e-3, "float32 (TF32)"},
      {kFloat16, Float32MatmulPrecision::kHighest, 2e-3, "float16"},
      {kBFloat16, Float32MatmulPrecision::kHighest, 1e-2, "bfloat16"},
      {kFloat64, Float32MatmulPrecision::kHighest, 1e-12, "float64"},
  };
  return c;
}

const std::vector<std::tuple<int64_t, int64_t, int64_t>>& sizes() {  // M, K, N
  static const std::vector<std::tuple<int64_t, int64_t, int64_t>> s = {
      {1, 1, 1},      {7, 33, 129},   {129, 7, 33},    {33, 1000, 7},   {1000, 129, 1},
      {1, 1000, 129}, {129, 1, 1000}, {129, 129, 129}, {1000, 33, 1000}};
  return s;
}

TEST(CudaGemm, EveryDtypeAndOddSizesMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  uint32_t seed = 1;
  for (const Case& c : cases()) {
    Float32MatmulPrecisionGuard precision(c.precision);
    for (const auto& [M, K, N] : sizes()) {
      const Tensor a = randn_cpu({M, K}, seed++, 1.0, c.dtype);
      const Tensor b = randn_cpu({K, N}, seed++, 1.0, c.dtype);
      const Tensor out = matmul(a.to(kGpu), b.to(kGpu));
      ASSERT_TRUE(out.is_cuda());
      EXPECT_EQ(out.dtype(), c.dtype);
      EXPECT_EQ(out.shape(), (Shape{M, N}));
      EXPECT_LE(rel_error(out, reference(a, b)), c.tol)
          << c.name << " M=" << M << " K=" << K << " N=" << N;
    }
  }
}

TEST(CudaGemm, TransposedViewsAreReadInPlaceAndMatch) {
  MANTISSA_REQUIRE_GPU();
  uint32_t seed = 100;
  for (const Case& c : cases()) {
    Float32MatmulPrecisionGuard precision(c.precision);
    for (const auto& [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{7, 33, 129},
                                  {129, 1000, 33},
                                  {1, 7, 1},
                                  {33, 1, 7}}) {
      for (int mode = 0; mode < 4; ++mode) {
        const bool ta = mode & 1, tb = mode & 2;
        // Stored transposed on the GPU, then viewed back with .t(): strides (1, rows).
        const Tensor a_store = randn_cpu(ta ? Shape{K, M} : Shape{M, K}, seed++, 1.0, c.dtype);
        const Tensor b_store = randn_cpu(tb ? Shape{N, K} : Shape{K, N}, seed++, 1.0, c.dtype);
        const Tensor a = ta ? a_store.to(kGpu).t() : a_store.to(kGpu);
        const Tensor b = tb ? b_store.to(kGpu).t() : b_store.to(kGpu);
        const Tensor out = matmul(a, b);
        EXPECT_LE(rel_error(out, reference(a, b)), c.tol)
            << c.name << " ta=" << ta << " tb=" << tb << " M=" << M << " K=" << K << " N=" << N;
      }
    }
  }
}

TEST(CudaGemm, StridedViewsThatCannotBeReadInPlaceAreCopied) {
  MANTISSA_REQUIRE_GPU();
  for (const Case& c : cases()) {
    Float32MatmulPrecisionGuard precision(c.precision);
    // Every other column (stride 2 along K), an offset row window, and a broadcast row.
    const Tensor big = randn_cpu({40, 66}, 7, 1.0, c.dtype).to(kGpu);
    const Tensor a = big.slice(1, 0, 66, 2).narrow(0, 3, 33);  // (33, 33), strides (66, 2)
    const Tensor b = randn_cpu({33, 129}, 8, 1.0, c.dtype).to(kGpu).narrow(1, 1, 127);
    EXPECT_LE(rel_error(matmul(a, b), reference(a, b)), c.tol) << c.name;
    const Tensor row = randn_cpu({1, 33}, 9, 1.0, c.dtype).to(kGpu).expand({5, 33});
    EXPECT_LE(rel_error(matmul(row, b), reference(row, b)), c.tol) << c.name;
  }
}

TEST(CudaGemm, BatchedProductsWithBroadcastMatch) {
  MANTISSA_REQUIRE_GPU();
  uint32_t seed = 300;
  for (const Case& c : cases()) {
    Float32MatmulPrecisionGuard precision(c.precision);
    auto check = [&](const Tensor& a, const Tensor& b, const char* what) {
      const Tensor out = matmul(a, b);
      const Tensor ref = reference(a, b);
      EXPECT_EQ(out.shape(), ref.shape()) << c.name << " " << what;
      EXPECT_LE(rel_error(out, ref), c.tol) << c.name << " " << what;
    };
    auto gpu = [&](const Shape& s) { return randn_cpu(s, seed++, 1.0, c.dtype).to(kGpu); };
    check(gpu({4, 7, 33}), gpu({4, 33, 129}), "(4,7,33)@(4,33,129)");
    // Attention's q @ k^T: k stored (B, N, K), read transposed per batch entry.
    check(gpu({3, 33, 65}), gpu({3, 129, 65}).transpose(-1, -2), "q@k^T");
    // Attention's p @ v with heads: (2, 3, M, K) @ (2, 3, K, N).
    check(gpu({2, 3, 17, 33}), gpu({2, 3, 33, 9}), "4-D");
    // Broadcast batch dims, and a 2-D weight folded into rows.
    check(gpu({1, 7, 33}), gpu({5, 33, 129}), "(1,..)@(5,..)");
    check(gpu({2, 1, 7, 33}), gpu({3, 33, 5}), "(2,1,..)@(3,..)");
    check(gpu({6, 7, 33}), gpu({33, 129}), "folded weight");
    check(gpu({6, 33, 7}).transpose(-1, -2), gpu({33, 129}), "transposed batch @ weight");
    check(gpu({1, 1}), gpu({5, 1, 1}), "1x1");
  }
}

TEST(CudaGemm, EmptyProductsGiveZerosOrEmpty) {
  MANTISSA_REQUIRE_GPU();
  const Tensor z = matmul(empty({3, 0}, kFloat32, kGpu), empty({0, 4}, kFloat32, kGpu));
  EXPECT_EQ(z.shape(), (Shape{3, 4}));
  EXPECT_EQ(rel_error(z, zeros({3, 4})), 0.0);
  EXPECT_EQ(matmul(empty({0, 5}, kFloat32, kGpu), empty({5, 4}, kFloat32, kGpu)).numel(), 0);
}

TEST(CudaGemm, LinearWithBiasMatchesTheCpu) {
  MANTISSA_REQUIRE_GPU();
  uint32_t seed = 500;
  for (const Case& c : cases()) {
    Float32MatmulPrecisionGuard precision(c.precision);
    for (const auto& [rows, in, out] : {std::tuple<int64_t, int64_t, int64_t>{1, 7, 33},
                                        {129, 33, 7},
                                        {1000, 129, 1000},
                                        {7, 1, 1}}) {
      const Tensor x = randn_cpu({rows, in}, seed++, 1.0, c.dtype);
      const Tensor w = randn_cpu({out, in}, seed++, 1.0, c.dtype);
      const Tensor bias = randn_cpu({out}, seed++, 1.0, c.dtype);
      const Tensor y = linear(x.to(kGpu), w.to(kGpu), bias.to(kGpu));
      const Tensor ref = linear(x.to(kFloat64), w.to(kFloat64), bias.to(kFloat64));
      EXPECT_EQ(y.dtype(), c.dtype);
      EXPECT_LE(rel_error(y, ref), c.tol)
          << c.name << " rows=" << rows << " in=" << in << " out=" << out;
    }
    // A batched linear (3-D input) folds into one GEMM with the bias epilogue.
    const Tensor x = randn_cpu({2, 5, 33}, seed++, 1.0, c.dtype);
    const Tensor w = randn_cpu({7, 33}, seed++, 1.0, c.dtype);
    const Tensor bias = randn_cpu({7}, seed++, 1.0, c.dtype);
    EXPECT_LE(rel_error(linear(x.to(kGpu), w.to(kGpu), bias.to(kGpu)),
                        linear(x.to(kFloat64), w.to(kFloat64), bias.to(kFloat64))),
              c.tol)
        << c.name << " 3-D";
  }
}

// Forward and both backward GEMMs (and the bias's row sum when with_bias) on the GPU against
// the same graph on the CPU in float64.
void check_linear_backward(bool with_bias) {
  uint32_t seed = with_bias ? 700 : 600;
  for (const Case& c : cases()) {
    Float32MatmulPrecisionGuard precision(c.precision);
    const Tensor x = randn_cpu({3, 43, 65}, seed++, 1.0, c.dtype);
    const Tensor w = randn_cpu({33, 65}, seed++, 1.0, c.dtype);
    const Tensor bias = randn_cpu({33}, seed++, 1.0, c.dtype);
    const Tensor g = randn_cpu({3, 43, 33}, seed++, 1.0, c.dtype);

    Tensor xg = x.to(kGpu).requires_grad_(), wg = w.to(kGpu).requires_grad_();
    Tensor bg = with_bias ? bias.to(kGpu).requires_grad_() : Tensor();
    Tensor y = linear(xg, wg, bg);
    y.backward(g.to(kGpu));

    Tensor xc = x.to(kFloat64).requires_grad_(), wc = w.to(kFloat64).requires_grad_();
    Tensor bc = with_bias ? bias.to(kFloat64).requires_grad_() : Tensor();
    Tensor yc = linear(xc, wc, bc);
    yc.backward(g.to(kFloat64));

    EXPECT_LE(rel_error(y, yc), c.tol) << c.name;
    ASSERT_TRUE(xg.grad().defined() && wg.grad().defined()) << c.name;
    EXPECT_TRUE(xg.grad().is_cuda() && wg.grad().is_cuda());
    EXPECT_EQ(xg.grad().dtype(), c.dtype);
    // The weight gradient sums 129 products: a little more rounding in fp16/bf16.
    EXPECT_LE(rel_error(xg.grad(), xc.grad()), c.tol) << c.name << " dx";
    EXPECT_LE(rel_error(wg.grad(), wc.grad()), c.tol) << c.name << " dw";
    if (with_bias) {
      ASSERT_TRUE(bg.grad().defined());
      EXPECT_LE(rel_error(bg.grad(), bc.grad()), c.tol) << c.name << " db";
    }
  }
}

TEST(CudaGemm, LinearBackwardMatchesTheCpu) {
  MANTISSA_REQUIRE_GPU();
  check_linear_backward(false);
}

// Needs the CUDA row sum (kernels::sum_rows) for the bias gradient.
TEST(CudaGemm, LinearBackwardWithBiasMatchesTheCpu) {
  MANTISSA_REQUIRE_GPU();
  check_linear_backward(true);
}

TEST(CudaGemm, MatmulBackwardThroughBatchedProducts) {
  MANTISSA_REQUIRE_GPU();
  Float32MatmulPrecisionGuard precision(Float32MatmulPrecision::kHighest);
  const Tensor a = randn_cpu({4, 7, 33}, 41);
  const Tensor b = randn_cpu({4, 33, 9}, 42);
  const Tensor g = randn_cpu({4, 7, 9}, 43);
  Tensor ag = a.to(kGpu).requires_grad_(), bg = b.to(kGpu).requires_grad_();
  matmul(ag, bg).backward(g.to(kGpu));
  Tensor ac = a.to(kFloat64).requires_grad_(), bc = b.to(kFloat64).requires_grad_();
  matmul(ac, bc).backward(g.to(kFloat64));
  EXPECT_LE(rel_error(ag.grad(), ac.grad()), 1e-5);
  EXPECT_LE(rel_error(bg.grad(), bc.grad()), 1e-5);
}

TEST(CudaGemm, OperandsOnDifferentDevicesAreRefused) {
  MANTISSA_REQUIRE_GPU();
  const Tensor a = randn_cpu({3, 4}, 1);
  try {
    (void)matmul(a.to(kGpu), a.t());
    ADD_FAILURE() << "a CPU operand was accepted with a GPU one";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("same GPU"), std::string::npos) << e.what();
  }
}

// Prints bf16 4096^3 throughput; asserts nothing about speed (timed on the host around
// cuda::synchronize, which at ~1 ms per product is within a few percent of cudaEvents).
TEST(CudaGemmSpeed, Bf16At4096) {
  MANTISSA_REQUIRE_GPU();
  constexpr int64_t n = 4096;
  constexpr int iters = 20;
  const Tensor a = randn_cpu({n, n}, 1, 1.0, kBFloat16).to(kGpu);
  const Tensor b = randn_cpu({n, n}, 2, 1.0, kBFloat16).to(kGpu);
  for (int i = 0; i < 3; ++i) (void)matmul(a, b);  // handles, workspace, heuristics, clocks
  cuda::synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) (void)matmul(a, b);
  cuda::synchronize();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double tflops = 2.0 * n * n * n * iters / s / 1e12;
  std::printf("[ CUDA GEMM ] bf16 %lldx%lldx%lld on %s: %.3f ms per product, %.1f TFLOP/s\n",
              static_cast<long long>(n), static_cast<long long>(n), static_cast<long long>(n),
              cuda::get_device_properties().name.c_str(), s / iters * 1e3, tflops);
  // The same for float32 with TF32 and without, for comparison.
  for (auto p : {Float32MatmulPrecision::kHigh, Float32MatmulPrecision::kHighest}) {
    Float32MatmulPrecisionGuard precision(p);
    const Tensor a32 = a.to(kFloat32), b32 = b.to(kFloat32);
    (void)matmul(a32, b32);
    cuda::synchronize();
    const auto u0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) (void)matmul(a32, b32);
    cuda::synchronize();
    const double u = std::chrono::duration<double>(std::chrono::steady_clock::now() - u0).count();
    std::printf("[ CUDA GEMM ] f32 (%s) 4096^3: %.3f ms per product, %.1f TFLOP/s\n",
                p == Float32MatmulPrecision::kHigh ? "TF32" : "full fp32", u / iters * 1e3,
                2.0 * n * n * n * iters / u / 1e12);
  }
}

}  // namespace
}  // namespace mantissa
