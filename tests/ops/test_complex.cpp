// Complex tensors: values of the arithmetic, matmul, abs/angle/real/imag/conj against
// std::complex, and every gradient against finite differences under PyTorch's convention
// (z.grad = dL/dx + i dL/dy for a real loss L).
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <functional>

#include "mantissa/core/generator.h"
#include "mantissa/ops/complex.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/matmul.h"
#include "mantissa/ops/reduce.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;
using cd = std::complex<double>;
using ComplexFn = std::function<Tensor(const std::vector<Tensor>&)>;

Tensor crandom(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  Tensor z = complex(uniform(shape, -1, 1, kFloat64, &g), uniform(shape, -1, 1, kFloat64, &g));
  z.requires_grad_();
  return z;
}

std::vector<cd> cvals(const Tensor& t) { return t.detach().to(kComplex128).to_vector<cd>(); }

// L = Re(sum(conj(r) * out)) for complex out (sum(r * out) for real out). out.backward(r)
// must give each input dL/dx + i dL/dy (the real part alone for a real input).
void expect_complex_gradcheck(const ComplexFn& fn, const std::vector<Tensor>& inputs,
                              double eps = 1e-6, double tol = 1e-6) {
  Tensor out = fn(inputs);
  ASSERT_TRUE(out.requires_grad());
  const bool complex_out = out.dtype().is_complex();
  Tensor r = complex_out ? crandom(out.shape(), 99).detach()
                         : uniform(out.shape(), -1, 1, kFloat64, nullptr);
  const std::vector<cd> rv = cvals(r);
  auto loss = [&] {
    const std::vector<cd> o = cvals(fn(inputs));
    double l = 0;
    for (size_t i = 0; i < o.size(); ++i) l += (std::conj(rv[i]) * o[i]).real();
    return l;
  };
  for (const Tensor& in : inputs) in.reset_grad();
  out.backward(r);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& in = inputs[k];
    ASSERT_TRUE(in.grad().defined()) << "input " << k;
    ASSERT_EQ(in.grad().dtype(), in.dtype()) << "input " << k;
    const std::vector<cd> analytic = cvals(in.grad());
    for (int64_t i = 0; i < in.numel(); ++i) {
      auto derivative = [&](double* x) {
        const double saved = *x;
        *x = saved + eps;
        const double fp = loss();
        *x = saved - eps;
        const double fm = loss();
        *x = saved;
        return (fp - fm) / (2 * eps);
      };
      cd numeric;
      if (in.dtype().is_complex()) {
        auto* parts = reinterpret_cast<double*>(in.data<cd>() + i);
        numeric = cd(derivative(parts), derivative(parts + 1));
      } else {
        numeric = cd(derivative(in.data<double>() + i), 0);
      }
      EXPECT_NEAR(analytic[i].real(), numeric.real(), tol) << "input " << k << " element " << i;
      EXPECT_NEAR(analytic[i].imag(), numeric.imag(), tol) << "input " << k << " element " << i;
    }
  }
}

TEST(ComplexOp, ArithmeticMatchesStdComplex) {
  const Tensor a = crandom({2, 3}, 1).detach(), b = crandom({2, 3}, 2).detach();
  const auto av = cvals(a), bv = cvals(b);
  const auto s = cvals(add(a, b)), d = cvals(sub(a, b, 2.0)), m = cvals(mul(a, b)),
             q = cvals(div(a, b));
  for (size_t i = 0; i < av.size(); ++i) {
    EXPECT_EQ(s[i], av[i] + bv[i]);
    EXPECT_EQ(d[i], av[i] - 2.0 * bv[i]);
    EXPECT_EQ(m[i], av[i] * bv[i]);
    EXPECT_NEAR(std::abs(q[i] - av[i] / bv[i]), 0, 1e-15);
  }
  // Real operands promote: float64 with complex64 gives complex128, float32 keeps complex64.
  const Tensor a64 = a.to(kComplex64);
  EXPECT_EQ(mul(a64, ones({2, 3}, kFloat64)).dtype(), kComplex128);
  EXPECT_EQ(mul(a64, ones({2, 3}, kFloat32)).dtype(), kComplex64);
  EXPECT_EQ(cvals(mul(a, 2.0))[0], 2.0 * av[0]);
  EXPECT_EQ(cvals(add(a, 1.5))[0], av[0] + 1.5);
  EXPECT_EQ(cvals(sub(a, 1.5))[0], av[0] - 1.5);
  // Broadcasting a row.
  const Tensor row = crandom({3}, 3).detach();
  EXPECT_EQ(cvals(add(a, row))[4], av[4] + cvals(row)[1]);
}

TEST(ComplexOp, PartsAbsAngleConjMatmul) {
  const Tensor z = tensor<cd>({cd(3, 4), cd(-1, 0), cd(0, -2), cd(0, 0)}, {2, 2});
  EXPECT_EQ(z.dtype(), kComplex128);
  EXPECT_EQ(vals(real(z)), (std::vector<double>{3, -1, 0, 0}));
  EXPECT_EQ(vals(imag(z)), (std::vector<double>{4, 0, -2, 0}));
  EXPECT_EQ(vals(abs(z)), (std::vector<double>{5, 1, 2, 0}));
  const auto ang = vals(angle(z));
  EXPECT_DOUBLE_EQ(ang[0], std::atan2(4.0, 3.0));
  EXPECT_DOUBLE_EQ(ang[1], M_PI);
  EXPECT_DOUBLE_EQ(ang[2], -M_PI / 2);
  EXPECT_EQ(ang[3], 0.0);
  EXPECT_EQ(cvals(conj(z))[0], cd(3, -4));
  EXPECT_EQ(real(z).dtype(), kFloat64);
  EXPECT_EQ(abs(z.to(kComplex64)).dtype(), kFloat32);
  // [[3+4i, -1], [-2i, 0]] @ [[1], [i]] = [[3+3i], [-2i]]
  const Tensor v = tensor<cd>({cd(1, 0), cd(0, 1)}, {2, 1});
  EXPECT_EQ(cvals(matmul(z, v)), (std::vector<cd>{cd(3, 3), cd(0, -2)}));
  // A non-contiguous operand (a transposed view).
  EXPECT_EQ(cvals(matmul(z.t(), z))[0], cd(3, 4) * cd(3, 4) + cd(0, -2) * cd(0, -2));
}

TEST(ComplexOp, ConversionsAndErrors) {
  const Tensor r = tensor<double>({1.5, -2});
  EXPECT_EQ(cvals(r.to(kComplex64)), (std::vector<cd>{cd(1.5, 0), cd(-2, 0)}));
  EXPECT_EQ(zeros({2}, kComplex128).dtype().itemsize(), 16u);
  EXPECT_EQ(cvals(full({1}, 2.5, kComplex128))[0], cd(2.5, 0));
  EXPECT_EQ(promote_types(kComplex64, kFloat64), kComplex128);
  EXPECT_EQ(promote_types(kInt64, kComplex64), kComplex64);
  EXPECT_EQ(dtype_from_string("cfloat"), kComplex64);
  const Tensor z = crandom({2}, 4).detach();
  expect_error([&] { z.to(kFloat32); }, {"drop the imaginary part", "real()"});
  expect_error([&] { exp(z); }, "not supported for complex tensors");
  expect_error([&] { sum(z); }, "not supported for complex tensors");
  // Printing says what it is (it said "[to] cannot convert complex64 to float64").
  expect_error([&] { (void)z.to_string(); },
               {"[print]", "not supported for complex tensors (dtype complex128)", "real()"});
  expect_error([&] { imag(r); }, "not implemented for real tensors");
  expect_error([&] { matmul(crandom({2, 2, 2}, 5), crandom({2, 2}, 6)); }, "2-D");
}

TEST(ComplexOp, GradcheckArithmetic) {
  for (int op = 0; op < 4; ++op) {
    expect_complex_gradcheck(
        [op](const std::vector<Tensor>& in) {
          switch (op) {
            case 0:
              return add(in[0], in[1], 0.5);
            case 1:
              return sub(in[0], in[1]);
            case 2:
              return mul(in[0], in[1]);
            default:
              return div(in[0], in[1]);
          }
        },
        {crandom({2, 3}, 10 + op), crandom({3}, 20 + op)});  // broadcast second operand
  }
  expect_complex_gradcheck([](const std::vector<Tensor>& in) { return mul(add(in[0], 0.5), 3.0); },
                           {crandom({4}, 30)});
  expect_complex_gradcheck([](const std::vector<Tensor>& in) { return div(in[0], 4.0); },
                           {crandom({4}, 31)});
}

TEST(ComplexOp, GradcheckMatmulAndUnary) {
  expect_complex_gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1].t()); },
                           {crandom({2, 3}, 40), crandom({4, 3}, 41)});
  for (const auto& f : std::vector<std::function<Tensor(const Tensor&)>>{
           [](const Tensor& z) { return abs(z); }, [](const Tensor& z) { return angle(z); },
           [](const Tensor& z) { return real(z); }, [](const Tensor& z) { return imag(z); },
           [](const Tensor& z) { return conj(z); }}) {
    expect_complex_gradcheck([&](const std::vector<Tensor>& in) { return f(in[0]); },
                             {crandom({5}, 50)});
  }
  // A composition whose loss is real, as a training loss is: |a z + b|^2.
  expect_complex_gradcheck(
      [](const std::vector<Tensor>& in) {
        Tensor e = abs(add(mul(in[0], in[1]), in[2]));
        return mul(e, e);
      },
      {crandom({3}, 60), crandom({3}, 61), crandom({3}, 62)});
}

TEST(ComplexOp, RealInputsReceiveTheRealPart) {
  // complex(x, y) and a real operand of complex arithmetic: real gradients.
  Generator g(70);
  Tensor x = uniform({3}, -1, 1, kFloat64, &g);
  Tensor y = uniform({3}, -1, 1, kFloat64, &g);
  x.requires_grad_();
  y.requires_grad_();
  expect_complex_gradcheck([](const std::vector<Tensor>& in) { return complex(in[0], in[1]); },
                           {x, y});
  Tensor w = uniform({3}, -1, 1, kFloat64, &g);
  w.requires_grad_();
  expect_complex_gradcheck([](const std::vector<Tensor>& in) { return mul(in[0], in[1]); },
                           {crandom({3}, 71), w});
  expect_complex_gradcheck(
      [](const std::vector<Tensor>& in) { return matmul(in[1], in[0].t()); },
      {crandom({2, 3}, 72), uniform({4, 3}, -1, 1, kFloat64, &g).requires_grad_()});
}

}  // namespace
}  // namespace mantissa
