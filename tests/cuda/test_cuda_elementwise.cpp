// Elementwise ops on a GPU against the CPU: binary arithmetic with broadcasting and scalars,
// unary math, activations, comparisons, where, clamp, maximum/minimum, forward and gradients,
// and the mixed-device error.
#include <gtest/gtest.h>

#include <string>

#include "cuda_op_check.h"
#include "mantissa/ops/elementwise.h"

namespace mantissa {
namespace {
using cuda_test::check_op;
using cuda_test::kGpu;
using cuda_test::randn_cpu;
using cuda_test::tol_of;
using V = std::vector<Tensor>;

const DType kFloats[] = {kFloat32, kFloat64, kBFloat16, kFloat16};

TEST(CudaElementwise, BinaryOpsBroadcastAndMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : kFloats) {
    const double tol = tol_of(dt);
    const Tensor a = randn_cpu({37, 1, 45}, 1).to(dt);
    const Tensor b = randn_cpu({5, 45}, 2).to(dt);
    const Tensor pos = add(abs(randn_cpu({5, 45}, 3)), 0.5).to(dt);
    const std::string n = std::string(dt.name()) + " ";
    check_op(
        n + "add", {a, b}, [](const V& v) { return add(v[0], v[1]); }, tol);
    check_op(
        n + "add alpha", {a, b}, [](const V& v) { return add(v[0], v[1], 2.5); }, tol);
    check_op(
        n + "sub", {a, b}, [](const V& v) { return sub(v[0], v[1]); }, tol);
    check_op(
        n + "mul", {a, b}, [](const V& v) { return mul(v[0], v[1]); }, tol);
    check_op(
        n + "div", {a, pos}, [](const V& v) { return div(v[0], v[1]); }, tol, true, 3 * tol);
    check_op(
        n + "maximum", {a, b}, [](const V& v) { return maximum(v[0], v[1]); }, tol);
    check_op(
        n + "minimum", {a, b}, [](const V& v) { return minimum(v[0], v[1]); }, tol);
    check_op(
        n + "pow tensor", {pos, b}, [](const V& v) { return pow(v[0], v[1]); }, 4 * tol);
    check_op(
        n + "scalars", {a},
        [](const V& v) {
          return rdiv(rsub(div(mul(sub(add(v[0], 1.5), 0.25), 3.0), 7.0), 4.0), 9.0);
        },
        4 * tol);
  }
}

TEST(CudaElementwise, NonContiguousAndZeroDimCpuScalars) {
  MANTISSA_REQUIRE_GPU();
  const Tensor a = randn_cpu({33, 70}, 4);
  const Tensor b = randn_cpu({70, 33}, 5);
  check_op(
      "transposed operand", {a, b}, [](const V& v) { return mul(v[0], v[1].t()); }, 1e-5);
  check_op(
      "narrowed operand", {a, b},
      [](const V& v) { return add(v[0].narrow(1, 3, 30), v[1].t().narrow(1, 1, 30)); }, 1e-5);
  // A 0-dim CPU tensor goes with a GPU tensor (PyTorch's CPU scalars).
  const Tensor g = a.to(kGpu);
  const Tensor s = scalar_tensor(2.5);
  EXPECT_LE(cuda_test::rel_error(mul(g, s), mul(a, s)), 1e-6);
  EXPECT_TRUE(mul(g, s).is_cuda());
  EXPECT_TRUE(mul(s, g).is_cuda());
}

TEST(CudaElementwise, MixedDevicesAreAnError) {
  MANTISSA_REQUIRE_GPU();
  const Tensor a = randn_cpu({4, 3}, 6);
  try {
    (void)add(a.to(kGpu), a);
    ADD_FAILURE() << "a GPU and a CPU tensor were added";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected all tensors to be on the same device, but "
                                         "found at least two devices, cuda:0 and cpu"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)where(gt(a, 0.0), a.to(kGpu), a), Error);
}

TEST(CudaElementwise, UnaryMathAndActivationsMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : kFloats) {
    const double tol = tol_of(dt);
    // 100003 elements: a grid-stride tail and more than one block per thread.
    const Tensor x = randn_cpu({100003}, 7, 2.0).to(dt);
    const Tensor p = add(abs(randn_cpu({1000, 3}, 8)), 0.1).to(dt);
    const std::string n = std::string(dt.name()) + " ";
    check_op(
        n + "neg", {x}, [](const V& v) { return neg(v[0]); }, tol);
    check_op(
        n + "abs", {x}, [](const V& v) { return abs(v[0]); }, tol);
    check_op(
        n + "relu", {x}, [](const V& v) { return relu(v[0]); }, tol);
    check_op(
        n + "exp", {x}, [](const V& v) { return exp(v[0]); }, 2 * tol);
    check_op(
        n + "tanh", {x}, [](const V& v) { return tanh(v[0]); }, 2 * tol);
    check_op(
        n + "sigmoid", {x}, [](const V& v) { return sigmoid(v[0]); }, 2 * tol);
    check_op(
        n + "gelu erf", {x}, [](const V& v) { return gelu(v[0], "none"); }, 2 * tol);
    check_op(
        n + "gelu tanh", {x}, [](const V& v) { return gelu(v[0], "tanh"); }, 2 * tol);
    check_op(
        n + "log", {p}, [](const V& v) { return log(v[0]); }, 2 * tol);
    check_op(
        n + "sqrt", {p}, [](const V& v) { return sqrt(v[0]); }, 2 * tol);
    check_op(
        n + "rsqrt", {p}, [](const V& v) { return rsqrt(v[0]); }, 2 * tol);
    check_op(
        n + "pow 2", {x}, [](const V& v) { return pow(v[0], 2.0); }, tol);
    check_op(
        n + "pow 3", {x}, [](const V& v) { return pow(v[0], 3.0); }, 2 * tol);
    check_op(
        n + "pow -0.5", {p}, [](const V& v) { return pow(v[0], -0.5); }, 2 * tol);
    check_op(
        n + "clamp", {x}, [](const V& v) { return clamp(v[0], -0.5, 1.25); }, tol);
  }
}

TEST(CudaElementwise, IntegerArithmeticComparisonsAndWhere) {
  MANTISSA_REQUIRE_GPU();
  const Tensor a = randn_cpu({300, 7}, 9, 20.0).to(kInt64);
  const Tensor b = randn_cpu({7}, 10, 20.0).to(kInt64);
  auto same = [](const Tensor& g, const Tensor& h) {
    ASSERT_TRUE(g.is_cuda());
    ASSERT_EQ(g.dtype(), h.dtype());
    EXPECT_EQ(g.cpu().to(kFloat64).to_vector<double>(), h.to(kFloat64).to_vector<double>());
  };
  const Tensor ga = a.to(kGpu), gb = b.to(kGpu);
  same(add(ga, gb), add(a, b));
  same(mul(ga, gb), mul(a, b));
  same(sub(ga, 3.0), sub(a, 3.0));
  same(maximum(ga, gb), maximum(a, b));
  same(clamp(ga, -5, 7), clamp(a, -5, 7));
  const Tensor nz = add(abs(b), 1.0);      // no 0/0
  same(div(ga, nz.to(kGpu)), div(a, nz));  // true division in float32
  same(eq(ga, gb), eq(a, b));
  same(ne(ga, gb), ne(a, b));
  same(lt(ga, gb), lt(a, b));
  same(le(ga, gb), le(a, b));
  same(gt(ga, gb), gt(a, b));
  same(ge(ga, gb), ge(a, b));
  const Tensor x = randn_cpu({300, 7}, 11);
  const Tensor gx = x.to(kGpu);
  same(gt(gx, 0.25), gt(x, 0.25));
  same(argmax(gx, 1), argmax(x, 1));
  same(sum(eq(ga, gb)), sum(eq(a, b)));  // accuracy counting: bool summed as int64
  same(isfinite(div(gx, 0.0)), isfinite(div(x, 0.0)));
  check_op(
      "where", {gt(x, 0.0), x, randn_cpu({7}, 12)},
      [](const V& v) { return where(v[0], v[1], v[2]); }, 1e-6);
  check_op(
      "where scalar", {gt(x, 0.0), x}, [](const V& v) { return where(v[0], v[1], -1.5); }, 1e-6);
}

}  // namespace
}  // namespace mantissa
