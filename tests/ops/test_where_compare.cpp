// Comparisons, isfinite and where.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "mantissa/ops/elementwise.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

TEST(WhereCompare, ComparisonsBroadcastAndGiveBool) {
  Tensor a = tensor<double>({1, 2, 3}, {3, 1});
  Tensor b = tensor<double>({2, 3});
  Tensor r = lt(a, b);
  EXPECT_EQ(r.dtype(), kBool);
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_EQ(vals(r), (std::vector<double>{1, 1, 0, 1, 0, 0}));
  EXPECT_EQ(vals(le(a, b)), (std::vector<double>{1, 1, 1, 1, 0, 1}));
  EXPECT_EQ(vals(gt(a, b)), (std::vector<double>{0, 0, 0, 0, 1, 0}));
  EXPECT_EQ(vals(ge(a, b)), (std::vector<double>{0, 0, 1, 0, 1, 1}));
  EXPECT_EQ(vals(eq(a, b)), (std::vector<double>{0, 0, 1, 0, 0, 1}));
  EXPECT_EQ(vals(ne(a, b)), (std::vector<double>{1, 1, 0, 1, 1, 0}));
}

TEST(WhereCompare, ComparisonsPromoteAndHandleNaN) {
  // int vs float compares as float: 1 < 1.5
  EXPECT_EQ(vals(lt(tensor<int64_t>({1, 2}), tensor<float>({1.5f, 1.5f}))),
            (std::vector<double>{1, 0}));
  EXPECT_EQ(vals(lt(tensor<int64_t>({1, 2}), 1.5)), (std::vector<double>{1, 0}));
  EXPECT_EQ(vals(eq(tensor<int32_t>({3, 4}), 3.0)), (std::vector<double>{1, 0}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = tensor<float>({nan, 1});
  EXPECT_EQ(vals(eq(x, x)), (std::vector<double>{0, 1}));
  EXPECT_EQ(vals(ne(x, x)), (std::vector<double>{1, 0}));
  EXPECT_EQ(vals(lt(x, 5.0)), (std::vector<double>{0, 1}));
  // A number is rounded to the tensor's dtype first: half(0.1) == 0.1 in float16.
  EXPECT_EQ(vals(eq(tensor_of({0.1}, {1}, kFloat16), 0.1)), (std::vector<double>{1}));
  EXPECT_EQ(vals(gt(tensor_of({1, 0, 1}, {3}, kBool), tensor_of({0, 0, 1}, {3}, kBool))),
            (std::vector<double>{1, 0, 0}));
}

TEST(WhereCompare, ComparisonsCarryNoGradient) {
  Tensor a = random_input({3}, 61);
  EXPECT_FALSE(gt(a, 0.0).requires_grad());
  EXPECT_FALSE(eq(a, a).requires_grad());
  EXPECT_THROW(gt(ones({2, 3}), ones({3, 2})), Error);
}

TEST(WhereCompare, IsFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = tensor<float>({1, inf, -inf, std::nanf(""), 0});
  EXPECT_EQ(isfinite(x).dtype(), kBool);
  EXPECT_EQ(vals(isfinite(x)), (std::vector<double>{1, 0, 0, 0, 1}));
  EXPECT_EQ(vals(isfinite(x.to(kBFloat16))), (std::vector<double>{1, 0, 0, 0, 1}));
  EXPECT_EQ(vals(isfinite(x.to(kFloat16))), (std::vector<double>{1, 0, 0, 0, 1}));
  EXPECT_EQ(vals(isfinite(tensor<int64_t>({5, -7}))), (std::vector<double>{1, 1}));
  // float8 e5m2 has inf and NaN (bit patterns: 1.0, inf, NaN, -max); e4m3fn has only NaN.
  const uint8_t e5m2[] = {0x3C, 0x7C, 0x7E, 0xFB};
  EXPECT_EQ(vals(isfinite(from_buffer(e5m2, kFloat8_e5m2, {4}))),
            (std::vector<double>{1, 0, 0, 1}));
  const uint8_t e4m3[] = {0x38, 0x7F, 0x7E};
  EXPECT_EQ(vals(isfinite(from_buffer(e4m3, kFloat8_e4m3fn, {3}))), (std::vector<double>{1, 0, 1}));
}

TEST(WhereCompare, WhereSelectsWithBroadcasting) {
  Tensor c = tensor_of({1, 0, 1}, {3}, kBool);
  Tensor a = tensor<double>({10, 20}, {2, 1});
  Tensor b = tensor<double>({-1, -2, -3});
  Tensor r = where(c, a, b);
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(r), (std::vector<double>{10, -2, 10, 20, -2, 20}));
  // Promotion: int and float branches give float.
  Tensor m = where(c, tensor<int64_t>({1, 2, 3}), tensor<float>({0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(m.dtype(), kFloat32);
  EXPECT_EQ(vals(m), (std::vector<double>{1, 0.5, 3}));
  // Number branches keep the tensor's dtype (masked_fill style).
  Tensor h =
      where(c, tensor_of({1, 2, 3}, {3}, kBFloat16), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(h.dtype(), kBFloat16);
  EXPECT_EQ(vals(h), (std::vector<double>{1, -std::numeric_limits<double>::infinity(), 3}));
  EXPECT_EQ(vals(where(c, 7.0, tensor<int32_t>({1, 2, 3}))), (std::vector<double>{7, 2, 7}));
}

TEST(WhereCompare, WhereGradients) {
  Tensor c = tensor_of({1, 0, 0, 1, 1, 0}, {2, 3}, kBool);
  auto a = random_input({2, 3}, 71);
  auto b = random_input({3}, 72);
  auto s = random_input({}, 73);
  expect_gradcheck([c](const auto& v) { return where(c, v[0], v[1]); }, {a, b});
  expect_gradcheck([c](const auto& v) { return where(c, v[0], v[1]); }, {s, a});
  expect_gradcheck([c](const auto& v) { return where(c, v[0], 0.0); }, {b});
  Tensor x = tensor<double>({1, 2, 3});
  x.requires_grad_();
  where(tensor_of({1, 0, 1}, {3}, kBool), x, 0.0).backward(tensor<double>({5, 5, 5}));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{5, 0, 5}));
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const auto tol = tolerance_for(dt);
    expect_matches_f64([c](const auto& v) { return where(c, v[0], v[1]); }, {a, b}, dt, tol.atol,
                       tol.rtol);
  }
}

TEST(WhereCompare, WhereErrors) {
  try {
    where(ones({3}), ones({3}), ones({3}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[where]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("float32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(where(ones({3}, kBool), ones({2}), ones({3})), Error);
}

}  // namespace
}  // namespace mantissa
