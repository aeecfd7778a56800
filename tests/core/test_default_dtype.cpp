// The thread-local default dtype that layer constructors read (torch.set_default_dtype).
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <thread>

#include "mantissa/core/default_dtype.h"
#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/nn/attention.h"
#include "mantissa/nn/batchnorm.h"
#include "mantissa/nn/conv.h"
#include "mantissa/nn/embedding.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/normalization.h"
#include "mantissa/nn/transformer.h"

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

// Guards held by unique_ptr / optional and closed outermost first: the default dtype is what
// the innermost open guard set while any is open, and what it was before the first once all are
// closed, with one warning (not the outer's bfloat16 restored by the inner guard, which would
// leave layers built in bf16 with no guard open).
TEST(DefaultDtype, GuardsClosedOutOfOrderRestoreTheDtypeBeforeThem) {
  forget_warnings_said_once();
  WarningRecorder warnings;
  ASSERT_EQ(get_default_dtype(), kFloat32);
  auto outer = std::make_unique<DefaultDtypeGuard>(kBFloat16);
  auto inner = std::make_unique<DefaultDtypeGuard>(kFloat64);
  outer.reset();
  EXPECT_EQ(get_default_dtype(), kFloat64);  // the innermost open guard's dtype
  inner.reset();
  EXPECT_EQ(get_default_dtype(), kFloat32);
  EXPECT_EQ(nn::Linear(2, 2).weight.dtype(), kFloat32);
  ASSERT_EQ(warnings.messages().size(), 1u);
  EXPECT_NE(warnings.messages()[0].find("default-dtype guards (DefaultDtypeGuard) were closed out "
                                        "of order"),
            std::string::npos);

  // Three deep, closed middle first, then outer, then inner.
  std::optional<DefaultDtypeGuard> a, b, c;
  a.emplace(kFloat16);
  b.emplace(kFloat64);
  c.emplace(kBFloat16);
  b.reset();
  EXPECT_EQ(get_default_dtype(), kBFloat16);
  a.reset();
  EXPECT_EQ(get_default_dtype(), kBFloat16);
  c.reset();
  EXPECT_EQ(get_default_dtype(), kFloat32);

  // A dtype the guard refuses opens no guard: the next ones still close cleanly.
  EXPECT_THROW(DefaultDtypeGuard refused{kInt32}, Error);
  { DefaultDtypeGuard g(kFloat16); }
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

// Every layer with parameters reads the default dtype, so Trainer::init_module builds a whole
// CNN or transformer directly in bf16.
TEST(DefaultDtype, EveryLayerWithoutDtypeUsesIt) {
  DefaultDtypeGuard g(kBFloat16);
  nn::Conv2d conv(1, 4, {3, 3});
  EXPECT_EQ(conv.weight.dtype(), kBFloat16);
  nn::BatchNorm2d bn(4);
  EXPECT_EQ(bn.weight.dtype(), kBFloat16);
  nn::LayerNorm ln({8});
  EXPECT_EQ(ln.weight.dtype(), kBFloat16);
  nn::Embedding emb(10, 8);
  EXPECT_EQ(emb.weight.dtype(), kBFloat16);
  nn::MultiheadAttention mha(8, 2);
  EXPECT_EQ(mha.in_proj_weight.dtype(), kBFloat16);
  EXPECT_EQ(mha.out_proj()->weight.dtype(), kBFloat16);
  nn::TransformerMLP mlp(8, 16);
  EXPECT_EQ(mlp.fc1()->weight.dtype(), kBFloat16);
  nn::Conv2d explicit_f32(1, 4, {3, 3}, {}, kFloat32);
  EXPECT_EQ(explicit_f32.weight.dtype(), kFloat32);
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
