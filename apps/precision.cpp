#include "precision.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "mantissa/core/error.h"

namespace mantissa::app {

const std::vector<std::string>& supported_precisions() {
  static const std::vector<std::string> names = {"32-true", "64-true"};
  return names;
}

PrecisionChoice parse_precision(const std::string& value) {
  std::string name = value;
  // Lightning's legacy integer spellings map to the "-true" names.
  if (value == "32" || value == "64") {
    name = value + "-true";
    fmt::print(stderr, "mantissa: warning: precision '{}' is a legacy alias; use '{}'\n", value,
               name);
  }
  if (name == "32-true") return {name, kFloat32};
  if (name == "64-true") return {name, kFloat64};
  // Names Lightning knows that need the mixed-precision, FP8 or quantization work.
  static const std::vector<std::string> planned = {
      "16-mixed",      "bf16-mixed", "16-true", "bf16-true", "transformer-engine",
      "nf4",           "nf4-dq",     "fp4",     "fp4-dq",    "int8",
      "int8-training", "16",         "bf16"};
  for (const auto& p : planned) {
    if (name == p) {
      fail("precision", "'{}' is not available in this build yet; valid values are: {}", value,
           fmt::join(supported_precisions(), ", "));
    }
  }
  fail("precision", "unknown precision '{}'; valid values are: {}", value,
       fmt::join(supported_precisions(), ", "));
}

}  // namespace mantissa::app
