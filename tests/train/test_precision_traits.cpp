// The precision registry's traits: what each precision does to a model's weights, which the
// recipes ask instead of comparing precision names.
#include <gtest/gtest.h>

#include "mantissa/train/precision_registry.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"
#include "support/test_util.h"

namespace mantissa::train {
namespace {

TEST(PrecisionTraits, QuantizedPrecisionsSayTheirBitsAndWhetherTheirCodesAreStored) {
  for (const char* name : {"nf4", "nf4-dq", "fp4", "fp4-dq"}) {
    const PrecisionTraits t = precision_traits(name);
    EXPECT_TRUE(t.quantized_weights) << name;
    EXPECT_EQ(t.weight_bits, 4) << name;
    EXPECT_TRUE(t.stores_codes) << name;
    EXPECT_FALSE(t.trains_base_weights()) << name;
    EXPECT_FALSE(t.fp8) << name;
  }
  const PrecisionTraits int8 = precision_traits("int8");
  EXPECT_TRUE(int8.quantized_weights);
  EXPECT_EQ(int8.weight_bits, 8);
  EXPECT_TRUE(int8.stores_codes);
  // int8-training keeps float weights that train; only its products are 8-bit.
  const PrecisionTraits training = precision_traits("int8-training");
  EXPECT_TRUE(training.quantized_weights);
  EXPECT_EQ(training.weight_bits, 8);
  EXPECT_FALSE(training.stores_codes);
  EXPECT_TRUE(training.trains_base_weights());
}

TEST(PrecisionTraits, FloatPrecisionsSayFp8HalfTrueAndApexLevels) {
  for (const char* name : {"transformer-engine", "transformer-engine-float16"}) {
    EXPECT_TRUE(precision_traits(name).fp8) << name;
    EXPECT_FALSE(precision_traits(name).quantized_weights) << name;
  }
  for (const char* name : {"16-true", "bf16-true"}) EXPECT_TRUE(precision_traits(name).half_true);
  EXPECT_TRUE(precision_traits("16-mixed").apex_levels);
  // An alias answers as its precision ("16" is 16-mixed).
  EXPECT_TRUE(precision_traits("16").apex_levels);
  for (const char* name : {"32-true", "64-true", "bf16-mixed", "bf16"}) {
    const PrecisionTraits t = precision_traits(name);
    EXPECT_FALSE(t.quantized_weights || t.stores_codes || t.fp8 || t.half_true || t.apex_levels)
        << name;
    EXPECT_EQ(t.weight_bits, 0) << name;
    EXPECT_TRUE(t.trains_base_weights()) << name;
  }
  // A value the registry does not know has none.
  const PrecisionTraits unknown = precision_traits("int4");
  EXPECT_FALSE(unknown.quantized_weights || unknown.fp8 || unknown.apex_levels);
}

// The quantizing plugin comes from the registry's factory, with its options.
TEST(PrecisionTraits, UncheckedFactoryMakesThePluginWithItsOptions) {
  PrecisionOptions options;
  options.extra = {{"dtype", "fp16"}, {"ignore_modules", "net.0,net.2"}};
  const std::unique_ptr<Precision> plugin = make_precision_unchecked("nf4-dq", options);
  const auto* bnb = dynamic_cast<const BitsandbytesPrecision*>(plugin.get());
  ASSERT_NE(bnb, nullptr);
  EXPECT_EQ(bnb->precision(), "nf4-dq");
  EXPECT_EQ(bnb->dtype(), kFloat16);
  EXPECT_EQ(bnb->ignore_modules(), (std::vector<std::string>{"net.0", "net.2"}));
  mantissa::testing::expect_error([] { make_precision_unchecked("nf5"); },
                                  "unknown precision 'nf5'");
}

}  // namespace
}  // namespace mantissa::train
