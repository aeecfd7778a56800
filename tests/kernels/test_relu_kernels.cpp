// relu kernels (kernels/cpu/elementwise/relu_kernels.h) on every level this CPU runs, bit for bit
// against the per-element form of the generic path: every bf16 and f16 bit pattern (NaN quieting
// included), f32 specials, tails of every length; and the op on strided views, which takes the
// generic path, against the same values made contiguous.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/elementwise/relu_kernels.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/half.h"
#include "mantissa/ops/elementwise.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using kernels::cpu::ReluKernels;
using namespace mantissa::testing;

std::vector<const ReluKernels*> levels() {
  std::vector<const ReluKernels*> v{&kernels::cpu::kReluScalar};
  const CpuFeatures& f = cpu_features();
  if (f.avx2) v.push_back(&kernels::cpu::kReluAvx2);
  if (f.avx512f && f.avx512bw) v.push_back(&kernels::cpu::kReluAvx512);
  return v;
}

// The generic path's per-element forms, through fp32 and one RNE rounding (T: BFloat16, Half).
template <typename T>
uint16_t ref_forward(uint16_t b) {
  const float x = T::from_bits(b);
  return T(x <= 0.0f ? 0.0f : x).x;
}
template <typename T>
uint16_t ref_backward(uint16_t g, uint16_t b) {
  const float x = T::from_bits(b);
  return T(x > 0.0f ? static_cast<float>(T::from_bits(g)) : 0.0f).x;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Every x bit pattern (every g pattern too, paired with varied x), over 65 536 values and
// again over every tail length below one vector.
TEST(ReluKernels, Bf16AndF16EveryBitPatternOnEveryLevel) {
  std::vector<uint16_t> x(1 << 16), g(1 << 16);
  for (uint32_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<uint16_t>(i);
    g[i] = static_cast<uint16_t>(i * 7919u + 13u);
  }
  for (const ReluKernels* k : levels()) {
    for (bool f16 : {false, true}) {
      SCOPED_TRACE(f16 ? "f16" : "bf16");
      const auto forward = f16 ? k->forward_f16 : k->forward_bf16;
      const auto backward = f16 ? k->backward_f16 : k->backward_bf16;
      const auto want_forward = f16 ? ref_forward<Half> : ref_forward<BFloat16>;
      const auto want_backward = f16 ? ref_backward<Half> : ref_backward<BFloat16>;
      for (int64_t n : {int64_t{1} << 16, int64_t{31}, int64_t{17}, int64_t{5}}) {
        const int64_t at = (int64_t{1} << 16) - n;  // the last n patterns: NaNs and -inf
        std::vector<uint16_t> y(n + 1, 0x1234), gx(n + 1, 0x1234);
        forward(x.data() + at, y.data(), n);
        backward(g.data() + at, x.data() + at, gx.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(y[i], want_forward(x[at + i])) << "x bits " << x[at + i];
          ASSERT_EQ(gx[i], want_backward(g[at + i], x[at + i]))
              << "x bits " << x[at + i] << " g bits " << g[at + i];
        }
        EXPECT_EQ(y[n], 0x1234);  // nothing written past the end
        EXPECT_EQ(gx[n], 0x1234);
      }
    }
  }
}

TEST(ReluKernels, F32SpecialsAndEveryTailLength) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> specials = {0.0f, -0.0f, 1.5f, -2.0f,  inf,
                                       -inf, nan,   -nan, 1e-45f, -1e-45f};
  for (const ReluKernels* k : levels()) {
    for (int64_t n = 0; n <= 40; ++n) {
      std::vector<float> x(n), g(n), y(n + 1, 7.0f), gx(n + 1, 7.0f);
      for (int64_t i = 0; i < n; ++i) {
        x[i] = specials[(i * 3) % specials.size()];
        g[i] = specials[(i * 7 + 1) % specials.size()];
      }
      k->forward_f32(x.data(), y.data(), n);
      k->backward_f32(g.data(), x.data(), gx.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(bits(y[i]), bits(x[i] <= 0.0f ? 0.0f : x[i])) << "n " << n << " i " << i;
        EXPECT_EQ(bits(gx[i]), bits(x[i] > 0.0f ? g[i] : 0.0f)) << "n " << n << " i " << i;
      }
      EXPECT_EQ(y[n], 7.0f);  // nothing written past the end
      EXPECT_EQ(gx[n], 7.0f);
    }
  }
}

TEST(ReluKernels, StridedViewsTakeTheGenericPathWithTheSameResults) {
  for (DType dt : {kFloat32, kBFloat16, kFloat16}) {
    SCOPED_TRACE(dt.name());
    const Tensor x = rnd({33, 20}, dt, 3).t();  // not contiguous
    Tensor xs = x.detach().requires_grad_(true);
    Tensor xc = x.contiguous().detach().requires_grad_(true);
    const Tensor ys = relu(xs), yc = relu(xc);
    expect_near_all(vals(ys), vals(yc), 0);
    const Tensor g = rnd({20, 33}, dt, 4);
    ys.backward(g);
    yc.backward(g);
    expect_near_all(vals(xs.grad()), vals(xc.grad()), 0);
  }
}

}  // namespace
}  // namespace mantissa
