// bench and compare run several precisions: a flag for a feature none of them has is refused
// (the --fp8-* and --quant-* flags) or warned about (--lora-alpha/--lora-dropout without
// --lora-rank), as train does with its one precision, instead of being dropped silently.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mantissa/core/error.h"
#include "mantissa/recipes/multi_precision_flags.h"
#include "mantissa/recipes/precision_settings.h"

namespace mantissa::recipes {
namespace {

std::string error_of(const auto& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MultiPrecisionFlags, Fp8FlagsNeedATransformerEnginePrecisionInTheList) {
  const PrecisionSettings margin = {{"fp8_margin", "2"}};
  const std::string e = error_of([&] {
    check_settings_apply_to_some({"32-true", "bf16-mixed"}, margin, "bench");
  });
  EXPECT_NE(e.find("[bench] --fp8-margin applies to the transformer-engine precisions, and "
                   "--precisions (32-true,bf16-mixed) lists none"),
            std::string::npos)
      << e;
  // One FP8 precision in the list is enough; no flag at all is always fine.
  EXPECT_EQ(
      error_of([&] {
        check_settings_apply_to_some({"32-true", "transformer-engine-float16"}, margin, "compare");
      }),
      "");
  EXPECT_EQ(error_of([&] { check_settings_apply_to_some({"32-true"}, {}, "bench"); }), "");
}

TEST(MultiPrecisionFlags, QuantFlagsNeedAQuantizedPrecisionInTheList) {
  QuantOptions dtype;
  dtype.quant_dtype = "fp16";
  std::string e = error_of([&] { check_quant_options_apply({"32-true"}, dtype, "compare"); });
  EXPECT_NE(e.find("[compare] --quant-dtype applies to the quantized precisions"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("--precisions (32-true) lists none"), std::string::npos) << e;
  QuantOptions ignore;
  ignore.quant_ignore = "head";
  e = error_of([&] { check_quant_options_apply({"bf16-true"}, ignore, "bench"); });
  EXPECT_NE(e.find("[bench] --quant-ignore applies"), std::string::npos) << e;
  EXPECT_EQ(error_of([&] { check_quant_options_apply({"32-true", "nf4"}, ignore, "bench"); }), "");
  EXPECT_EQ(error_of([&] { check_quant_options_apply({"32-true"}, QuantOptions{}, "bench"); }), "");
}

// Given is what counts, not the value: "--quant-dtype bf16" (the default) and "--quant-ignore ''"
// are refused with precisions that quantize nothing, as "fp16" is.
TEST(MultiPrecisionFlags, QuantFlagsGivenWithTheirDefaultValueAreRefusedToo) {
  QuantOptions dtype;
  dtype.quant_dtype_given = true;
  ASSERT_EQ(dtype.quant_dtype, "bf16");
  EXPECT_EQ(error_of([&] {
              check_quant_options_apply({"32-true", "bf16-true"}, dtype, "plan");
            }),
            "[plan] --quant-dtype applies to the quantized precisions (nf4, nf4-dq, fp4, fp4-dq, "
            "int8, int8-training), and --precisions (32-true,bf16-true) lists none");
  EXPECT_EQ(error_of([&] { check_quant_flags_apply("32-true", dtype, "train"); }),
            "[train] --quant-dtype applies to the quantized precisions (nf4, nf4-dq, fp4, fp4-dq, "
            "int8, int8-training), not to 32-true");
  QuantOptions ignore;
  ignore.quant_ignore_given = true;
  EXPECT_NE(error_of([&] {
              check_quant_flags_apply("bf16-mixed", ignore, "eval");
            }).find("[eval] --quant-ignore applies"),
            std::string::npos);
  // With a quantized precision in the list, given flags are what they are for.
  EXPECT_EQ(error_of([&] { check_quant_options_apply({"32-true", "nf4"}, dtype, "bench"); }), "");
  EXPECT_EQ(error_of([&] { check_quant_flags_apply("int8", ignore, "train"); }), "");
}

TEST(MultiPrecisionFlags, LoraSettingsWithoutARankWarn) {
  QuantOptions q;
  q.lora_alpha = 8;
  testing::internal::CaptureStderr();
  check_quant_options_apply({"32-true"}, q, "bench");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("warning: --lora-alpha has no effect without --lora-rank"), std::string::npos)
      << err;
  q.lora_rank = 4;  // with adapters the same settings are used: no warning
  testing::internal::CaptureStderr();
  check_quant_options_apply({"32-true"}, q, "bench");
  err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "");
}

}  // namespace
}  // namespace mantissa::recipes
