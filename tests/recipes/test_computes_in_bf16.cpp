// computes_in_bf16 (trainer_setup.h): which runs do their products in bf16, and so warn on a CPU
// that emulates bf16. The bitsandbytes modes compute in bf16 by default (--quant-dtype), so nf4
// runs warn where `mantissa info` lists them as emulated.
#include <gtest/gtest.h>

#include <memory>

#include "mantissa/recipes/trainer_setup.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"

namespace mantissa::recipes {
namespace {

bool in_bf16(const std::string& precision) {
  train::TrainerOptions o;
  o.precision = precision;
  o.enable_progress_bar = false;
  o.enable_model_summary = false;
  train::Trainer t(o);
  return computes_in_bf16(t);
}

bool in_bf16(std::shared_ptr<train::Precision> plugin) {
  train::TrainerOptions o;
  o.plugin = std::move(plugin);
  o.enable_progress_bar = false;
  o.enable_model_summary = false;
  train::Trainer t(o);
  return computes_in_bf16(t);
}

TEST(ComputesInBf16, Bf16WeightsAutocastAndTheQuantizedModesDefaultComputeDtype) {
  for (const char* p : {"bf16-mixed", "bf16-true", "nf4", "nf4-dq", "fp4", "fp4-dq"})
    EXPECT_TRUE(in_bf16(p)) << p;
  // The library's int8 modes compute in fp16 by default, as bitsandbytes' (the CLI passes its
  // --quant-dtype, bf16 unless given).
  for (const char* p : {"32-true", "64-true", "16-mixed", "16-true", "int8", "int8-training"})
    EXPECT_FALSE(in_bf16(p)) << p;
}

TEST(ComputesInBf16, AQuantizedModeGivenAnotherComputeDtypeDoesNot) {
  EXPECT_FALSE(in_bf16(std::make_shared<train::BitsandbytesPrecision>("nf4", kFloat32)));
  EXPECT_FALSE(in_bf16(std::make_shared<train::BitsandbytesPrecision>("int8", kFloat16)));
  EXPECT_TRUE(in_bf16(std::make_shared<train::BitsandbytesPrecision>("nf4", kBFloat16)));
}

}  // namespace
}  // namespace mantissa::recipes
