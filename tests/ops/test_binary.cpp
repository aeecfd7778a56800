// Binary elementwise ops: promotion, broadcasting, exact values, gradients, errors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/generator.h"
#include "mantissa/ops/elementwise.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

TEST(BinaryOps, ResultTypeFollowsPyTorchPromotion) {
  const Tensor f32 = ones({2}, kFloat32), f64 = ones({2}, kFloat64), f16 = ones({2}, kFloat16);
  const Tensor bf16 = ones({2}, kBFloat16), i64 = ones({2}, kInt64), i32 = ones({2}, kInt32);
  const Tensor b8 = ones({2}, kBool), u8 = ones({2}, kUInt8), i8 = ones({2}, kInt8);
  EXPECT_EQ(result_type(f32, f64), kFloat64);
  EXPECT_EQ(result_type(bf16, f16), kFloat32);
  EXPECT_EQ(result_type(i64, f16), kFloat16);
  EXPECT_EQ(result_type(b8, b8), kBool);
  EXPECT_EQ(result_type(b8, i32), kInt32);
  EXPECT_EQ(result_type(u8, i8), kInt32);
  // 0-dim tensors do not promote a dimensioned tensor of the same category...
  EXPECT_EQ(result_type(f32, scalar_tensor(1, kFloat64)), kFloat32);
  EXPECT_EQ(result_type(scalar_tensor(1, kFloat64), bf16), kBFloat16);
  EXPECT_EQ(result_type(i32, scalar_tensor(1, kInt64)), kInt32);
  // ...but do when their category is higher.
  EXPECT_EQ(result_type(i64, scalar_tensor(1, kFloat64)), kFloat64);
  EXPECT_EQ(result_type(b8, scalar_tensor(1, kInt64)), kInt64);
  // Two 0-dim tensors promote normally.
  EXPECT_EQ(result_type(scalar_tensor(1, kFloat32), scalar_tensor(1, kFloat64)), kFloat64);

  EXPECT_EQ((f32 + f64).dtype(), kFloat64);
  EXPECT_EQ((bf16 * f16).dtype(), kFloat32);
  EXPECT_EQ((f32 + scalar_tensor(1, kFloat64)).dtype(), kFloat32);
  Tensor mixed = tensor<int64_t>({1, 2, 3}) + tensor_of({0.5, 0.25, -4}, {3}, kFloat16);
  EXPECT_EQ(mixed.dtype(), kFloat16);
  EXPECT_EQ(vals(mixed), (std::vector<double>{1.5, 2.25, -1}));
}

TEST(BinaryOps, ScalarFormsKeepTheTensorDtypeUnlessAnIntegerMeetsAFraction) {
  const Tensor i = tensor<int64_t>({1, 2, 3});
  Tensor a = i * 2.5;
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_EQ(vals(a), (std::vector<double>{2.5, 5, 7.5}));
  Tensor b = i * 2.0;
  EXPECT_EQ(b.dtype(), kInt64);
  EXPECT_EQ(vals(b), (std::vector<double>{2, 4, 6}));
  EXPECT_EQ((tensor_of({1, 2}, {2}, kBFloat16) + 0.5).dtype(), kBFloat16);
  EXPECT_EQ((ones({2}, kBool) + 1.0).dtype(), kInt64);
  EXPECT_EQ((i / 2.0).dtype(), kFloat32);  // true division
  EXPECT_EQ(vals(i / 2.0), (std::vector<double>{0.5, 1, 1.5}));
  EXPECT_EQ(vals(10.0 - i), (std::vector<double>{9, 8, 7}));
  EXPECT_EQ(vals(3.0 + i), (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(vals(3.0 / tensor<double>({1, 2, 4})), (std::vector<double>{3, 1.5, 0.75}));
  EXPECT_EQ(vals(2.0 * tensor<float>({1, -2})), (std::vector<double>{2, -4}));
  EXPECT_EQ(vals(-tensor<float>({1, -2})), (std::vector<double>{-1, 2}));
}

TEST(BinaryOps, BroadcastingGivesTheRightValues) {
  Tensor a = tensor<double>({1, 2, 3}, {3, 1});
  Tensor b = tensor<double>({10, 20, 30, 40}, {4});
  Tensor c = a + b;
  EXPECT_EQ(c.shape(), (Shape{3, 4}));
  EXPECT_EQ(vals(c), (std::vector<double>{11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43}));
  EXPECT_EQ(vals(sub(a, b, 0.5)),
            (std::vector<double>{-4, -9, -14, -19, -3, -8, -13, -18, -2, -7, -12, -17}));
  EXPECT_EQ(vals(add(a, b, 2)),
            (std::vector<double>{21, 41, 61, 81, 22, 42, 62, 82, 23, 43, 63, 83}));
  Tensor s = scalar_tensor(2, kFloat64);
  EXPECT_EQ(vals(tensor<double>({1, 2, 3, 4, 5, 6}, {2, 3}) * s),
            (std::vector<double>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(vals(b / s), (std::vector<double>{5, 10, 15, 20}));
  EXPECT_EQ(vals(pow(a, tensor<double>({0, 1, 2}))),
            (std::vector<double>{1, 1, 1, 1, 2, 4, 1, 3, 9}));
  EXPECT_EQ(vals(pow(tensor<double>({1, 2, 3}), 2)), (std::vector<double>{1, 4, 9}));
  EXPECT_EQ(vals(pow(tensor<double>({4, 9}), 0.5)), (std::vector<double>{2, 3}));
}

TEST(BinaryOps, StridedAndLargeInputsTakeEveryPath) {
  // 300x200 > the parallel grain: flat parallel path, row path (transposed input), broadcast.
  Generator g(7);
  Tensor a = uniform({300, 200}, -1, 1, kFloat32, &g);
  Tensor b = uniform({200, 300}, -1, 1, kFloat32, &g).t();  // non-contiguous
  Tensor row = uniform({200}, -1, 1, kFloat32, &g);
  const auto av = a.to_vector<float>(), bv = b.to_vector<float>(), rv = row.to_vector<float>();
  const auto sum_ab = (a + b).to_vector<float>();
  const auto prod_ar = (a * row).to_vector<float>();
  const auto sc = (a * 3.0).to_vector<float>();
  for (size_t i = 0; i < av.size(); ++i) {
    ASSERT_EQ(sum_ab[i], av[i] + bv[i]) << i;
    ASSERT_EQ(prod_ar[i], av[i] * rv[i % 200]) << i;
    ASSERT_EQ(sc[i], av[i] * 3.0f) << i;
  }
  // Narrow floats through the same paths: one rounding of the fp32 result.
  Tensor ah = a.to(kBFloat16), bh = b.to(kBFloat16);
  const auto ahv = ah.to_vector<float>(), bhv = bh.to_vector<float>();
  const auto sum_h = (ah + bh).to_vector<BFloat16>();
  for (size_t i = 0; i < ahv.size(); ++i) ASSERT_EQ(sum_h[i].x, BFloat16(ahv[i] + bhv[i]).x) << i;
}

TEST(BinaryOps, Float32WithANarrowFloatOperandWidensItExactlyOnEveryPath) {
  // float32 with bf16 or f16 (autocast's Linear output added to the fp32 residual stream) is
  // computed in fp32 on the narrow operand's exact values: the bits of converting it first. Both
  // orders, a flat parallel case (300 x 200), a transposed (strided) narrow operand, a
  // broadcast row, a single element and bf16 with f16.
  Generator g(11);
  const Tensor a = uniform({300, 200}, -4, 4, kFloat32, &g);
  for (DType narrow : {kBFloat16, kFloat16}) {
    const Tensor n = uniform({300, 200}, -4, 4, kFloat32, &g).to(narrow);
    const Tensor nt = uniform({200, 300}, -4, 4, kFloat32, &g).to(narrow).t();
    const Tensor row = uniform({200}, -4, 4, kFloat32, &g).to(narrow);
    const Tensor one = uniform({1}, -4, 4, kFloat32, &g).to(narrow);
    for (const Tensor& x : {n, nt, row, one}) {
      const Tensor w = x.to(kFloat32);
      const auto expect_same = [&](const Tensor& got, const Tensor& want, const char* what) {
        ASSERT_EQ(got.dtype(), kFloat32) << what;
        const auto gv = got.to_vector<float>(), wv = want.to_vector<float>();
        ASSERT_EQ(gv.size(), wv.size()) << what;
        for (size_t i = 0; i < gv.size(); ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(gv[i]), std::bit_cast<uint32_t>(wv[i]))
              << what << " " << narrow.name() << " at " << i;
      };
      expect_same(a + x, a + w, "f32 + narrow");
      expect_same(x + a, w + a, "narrow + f32");
      expect_same(sub(a, x, 0.5), sub(a, w, 0.5), "f32 - 0.5 narrow");
      expect_same(a * x, a * w, "f32 * narrow");
      expect_same(x / a, w / a, "narrow / f32");
    }
  }
  const Tensor hb = uniform({64}, -4, 4, kFloat32, &g).to(kFloat16);
  const Tensor bb = uniform({64}, -4, 4, kFloat32, &g).to(kBFloat16);
  const Tensor got = hb + bb;
  ASSERT_EQ(got.dtype(), kFloat32);
  const auto gv = got.to_vector<float>();
  const auto hv = hb.to_vector<float>(), bv = bb.to_vector<float>();
  for (size_t i = 0; i < gv.size(); ++i) ASSERT_EQ(gv[i], hv[i] + bv[i]) << i;
}

TEST(BinaryOps, HalfResultsAreRoundedOnceToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and the next half (1 + 2^-10): ties go to even (1).
  Tensor one = tensor_of({1, 1}, {2}, kFloat16);
  Tensor tiny = tensor_of({std::ldexp(1.0, -11), 3 * std::ldexp(1.0, -11)}, {2}, kFloat16);
  EXPECT_EQ(vals(one + tiny), (std::vector<double>{1.0, 1.0 + std::ldexp(1.0, -9)}));
  // bf16: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
  Tensor b1 = tensor_of({1}, {1}, kBFloat16);
  Tensor bt = tensor_of({std::ldexp(1.0, -8)}, {1}, kBFloat16);
  EXPECT_EQ(vals(b1 + bt), (std::vector<double>{1.0}));
}

TEST(BinaryOps, IntegerAndBoolArithmetic) {
  Tensor a = tensor<int32_t>({7, -3, 4});
  Tensor b = tensor<int32_t>({2, 2, -3});
  EXPECT_EQ((a + b).dtype(), kInt32);
  EXPECT_EQ(vals(a + b), (std::vector<double>{9, -1, 1}));
  EXPECT_EQ(vals(a - b), (std::vector<double>{5, -5, 7}));
  EXPECT_EQ(vals(a * b), (std::vector<double>{14, -6, -12}));
  Tensor q = a / b;  // true division
  EXPECT_EQ(q.dtype(), kFloat32);
  EXPECT_EQ(vals(q), (std::vector<double>{3.5, -1.5, 4.0f / -3.0f}));
  EXPECT_EQ(vals(pow(a, 2)), (std::vector<double>{49, 9, 16}));
  EXPECT_EQ(pow(a, 2).dtype(), kInt32);
  EXPECT_EQ(vals(pow(tensor<int64_t>({2, -1, 1, 5}), tensor<int64_t>({10, -3, -2, -1}))),
            (std::vector<double>{1024, -1, 1, 0}));
  EXPECT_EQ(vals(maximum(a, b)), (std::vector<double>{7, 2, 4}));
  EXPECT_EQ(vals(minimum(a, b)), (std::vector<double>{2, -3, -3}));
  Tensor t = tensor_of({1, 0, 1}, {3}, kBool), f = tensor_of({1, 0, 0}, {3}, kBool);
  EXPECT_EQ((t + f).dtype(), kBool);
  EXPECT_EQ(vals(t + f), (std::vector<double>{1, 0, 1}));  // logical or
  EXPECT_EQ(vals(t * f), (std::vector<double>{1, 0, 0}));  // logical and
  EXPECT_EQ(vals(t + tensor<int64_t>({5, 5, 5})), (std::vector<double>{6, 5, 6}));
}

TEST(BinaryOps, MaximumAndMinimumPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = tensor<float>({1, static_cast<float>(nan), 3});
  Tensor b = tensor<float>({static_cast<float>(nan), 2, 1});
  auto mx = vals(maximum(a, b)), mn = vals(minimum(a, b));
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]));
  EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]));
  EXPECT_EQ(mx[2], 3);
  EXPECT_EQ(mn[2], 1);
}

TEST(BinaryOps, GradcheckTensorTensor) {
  auto x31 = random_input({3, 1}, 1);
  auto x4 = random_input({4}, 2);
  auto x23 = random_input({2, 3}, 3);
  auto s = random_input({}, 4);
  auto pos23 = random_input({2, 3}, 5, 0.5, 1.5);
  auto pos3 = random_input({3}, 6, 0.5, 1.5);
  expect_gradcheck([](const auto& v) { return add(v[0], v[1], 1.5); }, {x31, x4});
  expect_gradcheck([](const auto& v) { return v[0] + v[1]; }, {x23, s});
  expect_gradcheck([](const auto& v) { return sub(v[0], v[1], 0.5); }, {x31, x4});
  expect_gradcheck([](const auto& v) { return v[0] - v[1]; }, {s, x23});
  expect_gradcheck([](const auto& v) { return v[0] * v[1]; }, {x31, x4});
  expect_gradcheck([](const auto& v) { return v[0] * v[1]; }, {x23, s});
  expect_gradcheck([](const auto& v) { return v[0] * v[0]; }, {x23});  // same input twice
  expect_gradcheck([](const auto& v) { return v[0] / v[1]; }, {x23, pos3});
  expect_gradcheck([](const auto& v) { return v[0] / v[1]; },
                   {x31, random_input({4}, 7, 0.5, 1.5)});
  expect_gradcheck([](const auto& v) { return pow(v[0], v[1]); }, {pos23, random_input({3}, 8)});
  expect_gradcheck([](const auto& v) { return pow(v[0], v[1]); }, {pos3, s});
  expect_gradcheck([](const auto& v) { return maximum(v[0], v[1]); }, {x31, x4});
  expect_gradcheck([](const auto& v) { return minimum(v[0], v[1]); }, {x23, s});
}

TEST(BinaryOps, GradcheckTensorScalar) {
  auto x = random_input({2, 3}, 11);
  auto pos = random_input({2, 3}, 12, 0.5, 2.0);
  expect_gradcheck([](const auto& v) { return v[0] + 2.5; }, {x});
  expect_gradcheck([](const auto& v) { return v[0] - 2.5; }, {x});
  expect_gradcheck([](const auto& v) { return v[0] * -1.5; }, {x});
  expect_gradcheck([](const auto& v) { return v[0] / 3.0; }, {x});
  expect_gradcheck([](const auto& v) { return 1.0 - v[0]; }, {x});
  expect_gradcheck([](const auto& v) { return 2.0 / v[0]; }, {pos});
  for (double e : {2.0, 3.0, 0.5, -1.5, 1.0})
    expect_gradcheck([e](const auto& v) { return pow(v[0], e); }, {pos});
  // exponent 0: constant 1, zero gradient
  x.reset_grad();
  Tensor z = pow(x, 0.0);
  EXPECT_EQ(vals(z), std::vector<double>(6, 1.0));
  z.backward(ones({2, 3}, kFloat64));
  EXPECT_EQ(vals(x.grad()), std::vector<double>(6, 0.0));
}

TEST(BinaryOps, TiedMaximumSplitsTheGradient) {
  Tensor a = tensor<double>({1, 2, 3});
  Tensor b = tensor<double>({1, 5, 0});
  a.requires_grad_();
  b.requires_grad_();
  maximum(a, b).backward(tensor<double>({2, 2, 2}));
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{1, 0, 2}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{1, 2, 0}));
  a.reset_grad();
  b.reset_grad();
  minimum(a, b).backward(tensor<double>({2, 2, 2}));
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{1, 2, 0}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{1, 0, 2}));
}

TEST(BinaryOps, PowExponentGradientIsZeroWhereTheBaseIsZero) {
  Tensor base = tensor<double>({0, 2, 0});
  Tensor e = tensor<double>({2, 3, 0});
  base.requires_grad_();
  e.requires_grad_();
  pow(base, e).backward(ones({3}, kFloat64));
  const auto ge = vals(e.grad());
  EXPECT_EQ(ge[0], 0.0);
  EXPECT_DOUBLE_EQ(ge[1], 8 * std::log(2.0));
  EXPECT_EQ(ge[2], 0.0);
  // d/dbase: e * base^(e-1); zero where e == 0
  EXPECT_EQ(vals(base.grad()), (std::vector<double>{0, 12, 0}));
}

TEST(BinaryOps, MixedDtypeGradientsArriveInEachInputsDtype) {
  Tensor a = tensor<float>({1, 2});
  Tensor b = tensor<double>({3, 4});
  Tensor h = tensor_of({0.5, 0.25}, {2}, kFloat16);
  a.requires_grad_();
  b.requires_grad_();
  h.requires_grad_();
  Tensor y = a * b + h;  // f64
  EXPECT_EQ(y.dtype(), kFloat64);
  y.backward(ones({2}, kFloat64));
  EXPECT_EQ(a.grad().dtype(), kFloat32);
  EXPECT_EQ(h.grad().dtype(), kFloat16);
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{3, 4}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{1, 2}));
  EXPECT_EQ(vals(h.grad()), (std::vector<double>{1, 1}));
  // An integer operand gets no gradient; the float one does.
  Tensor w = tensor<float>({1, 2});
  w.requires_grad_();
  (tensor<int64_t>({3, 4}) * w).backward(ones({2}));
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{3, 4}));
}

TEST(BinaryOps, NoGraphWithoutRequiresGradOrUnderNoGrad) {
  Tensor a = ones({2});
  a.requires_grad_();
  EXPECT_FALSE((ones({2}) * ones({2})).requires_grad());
  EXPECT_TRUE((a * 2.0).requires_grad());
  NoGradGuard guard;
  EXPECT_FALSE((a * a).requires_grad());
}

TEST(BinaryOps, LowPrecisionMatchesFloat64) {
  auto x = random_input({3, 4}, 21);
  auto y = random_input({4}, 22);
  auto pos = random_input({3, 4}, 23, 0.5, 2.0);
  auto e = random_input({4}, 24, -1.0, 2.0);
  const std::vector<std::pair<testing::OpFn, std::vector<Tensor>>> cases = {
      {[](const auto& v) { return add(v[0], v[1], 0.75); }, {x, y}},
      {[](const auto& v) { return v[0] - v[1]; }, {x, y}},
      {[](const auto& v) { return v[0] * v[1]; }, {x, y}},
      {[](const auto& v) { return v[1] / v[0]; }, {pos, y}},
      {[](const auto& v) { return pow(v[0], v[1]); }, {pos, e}},
      {[](const auto& v) { return pow(v[0], 1.5); }, {pos}},
      {[](const auto& v) { return maximum(v[0], v[1]); }, {x, y}},
      {[](const auto& v) { return minimum(v[0], v[1]); }, {x, y}},
      {[](const auto& v) { return v[0] * 0.3 + 0.1; }, {x}},
      {[](const auto& v) { return 1.0 / v[0]; }, {pos}},
  };
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const auto tol = tolerance_for(dt);
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << dt.name() << " case " << i);
      expect_matches_f64(cases[i].first, cases[i].second, dt, tol.atol, tol.rtol);
    }
  }
}

TEST(BinaryOps, ErrorsNameTheOpAndTheShapes) {
  expect_error([] { add(ones({2, 3}), ones({4})); }, {"[add]", "[2, 3]", "[4]"});
  expect_error([] { sub(ones({2, 3}), ones({4})); }, {"[sub]", "[2, 3]", "[4]"});
  expect_error([] { mul(ones({2, 3}), ones({3, 2})); }, {"[mul]", "[2, 3]", "[3, 2]"});
  expect_error([] { maximum(ones({5}), ones({2, 4})); }, {"[maximum]", "[5]", "[2, 4]"});
  expect_error([] { add(ones({2}, kFloat8_e4m3fn), ones({2}, kFloat8_e4m3fn)); },
               {"[add]", "float8_e4m3fn"});
  expect_error([] { add(ones({2}, kInt64), ones({2}, kInt64), 0.5); }, {"[add]", "alpha"});
  expect_error([] { sub(ones({2}, kBool), ones({2}, kBool)); }, {"[sub]", "bool"});
  expect_error([] { pow(ones({2}, kInt64), -1.0); }, {"[pow]", "negative"});
  expect_error([] { neg(ones({2}, kBool)); }, {"[neg]", "bool"});
  expect_error([] { add(Tensor(), ones({2})); }, {"undefined"});
}

}  // namespace
}  // namespace mantissa
