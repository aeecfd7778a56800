// A module reused by a Trainer of another precision (src/train/earlier_precision_check.h): a
// module a bf16-true fit left in bfloat16 is refused by a 32-true Trainer with the cause and
// the fix (not a bare dtype mismatch in the first linear); converted back, or
// reused by a plugin that converts it anyway, it trains.
#include <gtest/gtest.h>

#include "support/test_util.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

using mantissa::testing::error_of;

void fit(TrainModule& module, const std::string& precision) {
  data::DataLoader train(testing::tiny_dataset(16), 8);
  Trainer t(testing::quiet_options(precision));
  t.fit(module, train);
}

TEST(EarlierPrecisionCheck, Bf16TrueModuleUnderA32TrueTrainerNamesTheCause) {
  testing::TinyModule module;
  fit(module, "bf16-true");
  const std::string expected =
      "[Trainer] the module's parameters are bfloat16 ('net.0.weight' and 3 more), left so by an "
      "earlier fit or conversion in precision bf16-true, but this Trainer's precision 32-true "
      "expects float32 parameters: its forward would mix the two dtypes. Call module.to() with "
      "float32 first, or build a new module";
  EXPECT_EQ(error_of([&] { fit(module, "32-true"); }), expected);
  data::DataLoader val(testing::tiny_dataset(8), 8);
  Trainer v(testing::quiet_options("32-true"));
  EXPECT_EQ(error_of([&] { v.validate(module, val); }), expected);
  // The fix the message gives works.
  module.to(kFloat32);
  EXPECT_NO_THROW(fit(module, "32-true"));
  EXPECT_EQ(module.parameters().front().dtype(), kFloat32);
}

TEST(EarlierPrecisionCheck, PluginsThatConvertTheModuleStillTakeIt) {
  testing::TinyModule module;
  fit(module, "32-true");
  fit(module, "bf16-true");  // float32 modules convert to any precision
  EXPECT_EQ(module.parameters().front().dtype(), kBFloat16);
  fit(module, "16-true");  // module.to(float16)
  EXPECT_EQ(module.parameters().front().dtype(), kFloat16);
  fit(module, "64-true");
  EXPECT_EQ(module.parameters().front().dtype(), kFloat64);
  const std::string err = error_of([&] { fit(module, "bf16-mixed"); });
  EXPECT_NE(err.find("parameters are float64"), std::string::npos) << err;
  EXPECT_NE(err.find("precision bf16-mixed expects float32"), std::string::npos) << err;
}

}  // namespace
}  // namespace mantissa::train
