#include "precision.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "mantissa/core/error.h"

namespace mantissa::app {

const std::vector<std::string>& supported_precisions() {
  static const std::vector<std::string> names = {"32-true",    "64-true", "16-mixed",
                                                 "bf16-mixed", "16-true", "bf16-true"};
  return names;
}

PrecisionChoice parse_precision(const std::string& value) {
  // Lightning's legacy spellings (spec/amp.md §3.1): 16 and bf16 meant mixed precision.
  std::string name = value;
  if (value == "16" || value == "bf16") name = value + "-mixed";
  if (value == "32" || value == "64") name = value + "-true";
  if (name != value) {
    fmt::print(stderr, "mantissa: warning: precision '{}' is a legacy alias; use '{}'\n", value,
               name);
  }
  if (name == "32-true") return {name, kFloat32, std::nullopt, false};
  if (name == "64-true") return {name, kFloat64, std::nullopt, false};
  if (name == "bf16-mixed") return {name, kFloat32, kBFloat16, false};
  if (name == "16-mixed") return {name, kFloat32, kFloat16, true};
  if (name == "bf16-true") return {name, kBFloat16, std::nullopt, false};
  if (name == "16-true") return {name, kFloat16, std::nullopt, false};
  // Names Lightning knows whose FP8 and quantization plugins are not built yet.
  static const std::vector<std::string> planned = {
      "transformer-engine", "transformer-engine-float16", "nf4", "nf4-dq", "fp4", "fp4-dq", "int8",
      "int8-training"};
  for (const auto& p : planned) {
    if (name == p) {
      fail("precision",
           "'{}' is recognised but not available in this build yet; valid values "
           "are: {}",
           value, fmt::join(supported_precisions(), ", "));
    }
  }
  fail("precision",
       "unknown precision '{}'; valid values are: {} (legacy aliases: 16, 32, 64, bf16)", value,
       fmt::join(supported_precisions(), ", "));
}

}  // namespace mantissa::app
