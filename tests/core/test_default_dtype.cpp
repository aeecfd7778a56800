// The thread-local default dtype that layer constructors read (torch.set_default_dtype).
#include <gtest/gtest.h>

#include <thread>

#include "mantissa/core/default_dtype.h"
#include "mantissa/core/error.h"
#include "mantissa/nn/linear.h"

namespace mantissa {
namespace {

TEST(DefaultDtype, GuardSetsAndRestores) {
  EXPECT_EQ(get_default_dtype(), kFloat32);
  {
    DefaultDtypeGuard outer(kBFloat16);
    EXPECT_EQ(get_default_dtype(), kBFloat16);
    {
      DefaultDtypeGuard inner(kFloat64);
      EXPECT_EQ(get_default_dtype(), kFloat64);
    }
    EXPECT_EQ(get_default_dtype(), kBFloat16);
  }
  EXPECT_EQ(get_default_dtype(), kFloat32);
}

TEST(DefaultDtype, LinearWithoutDtypeUsesItAndExplicitDtypeWins) {
  DefaultDtypeGuard g(kFloat16);
  nn::Linear a(3, 2);
  EXPECT_EQ(a.weight.dtype(), kFloat16);
  EXPECT_EQ(a.bias.dtype(), kFloat16);
  nn::Linear b(3, 2, true, kFloat64);
  EXPECT_EQ(b.weight.dtype(), kFloat64);
}

TEST(DefaultDtype, IsPerThread) {
  DefaultDtypeGuard g(kBFloat16);
  DType seen = kFloat64;
  std::thread t([&] { seen = get_default_dtype(); });
  t.join();
  EXPECT_EQ(seen, kFloat32);
}

TEST(DefaultDtype, RejectsNonFloatingDtypes) {
  EXPECT_THROW(set_default_dtype(kInt64), Error);
  EXPECT_THROW({ DefaultDtypeGuard g(kFloat8_e4m3fn); }, Error);
  EXPECT_EQ(get_default_dtype(), kFloat32);
}

}  // namespace
}  // namespace mantissa
