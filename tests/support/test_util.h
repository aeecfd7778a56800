#pragma once
// Small helpers the tests share, next to the gradcheck harness. A test file brings both in with
// `using namespace mantissa::testing;`.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "mantissa/core/error.h"
#include "mantissa/core/generator.h"
#include "mantissa/core/tensor.h"
#include "support/gradcheck.h"

namespace mantissa::testing {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A tensor's values widened to double (exact for every dtype), for comparing with literals.
inline std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

// Runs fn, expects a mantissa::Error whose message contains every piece.
inline void expect_error(const std::function<void()>& fn,
                         std::initializer_list<std::string> pieces) {
  try {
    fn();
    ADD_FAILURE() << "expected mantissa::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : pieces)
      EXPECT_NE(msg.find(p), std::string::npos) << msg << "\nlacks: " << p;
  }
}
inline void expect_error(const std::function<void()>& fn, const std::string& piece) {
  expect_error(fn, {piece});
}

// The message of the mantissa::Error fn throws, or "" when it throws none.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Elementwise |got - want| <= tol; an infinite want must be matched exactly.
inline void expect_near_all(const std::vector<double>& got, const std::vector<double>& want,
                            double tol = 1e-15) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
    }
  }
}

// Uniform values in [-1, 1) of dtype dt, reproducible from seed, without requires_grad.
inline Tensor rnd(const Shape& s, DType dt, uint64_t seed) {
  Generator g(seed);
  return uniform(s, -1.0, 1.0, dt, &g);
}

// n normal values each scaled by 2^u, u uniform in [-spread, spread): magnitudes over many
// binades (block scales and casts meet small, large and mixed blocks), reproducible from seed.
inline std::vector<float> wide_normal(int64_t n, uint32_t seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ex(-spread, spread);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng) * std::exp2(ex(rng));
  return v;
}

}  // namespace mantissa::testing
