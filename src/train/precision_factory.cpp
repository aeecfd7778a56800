#include "mantissa/train/precision_factory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "mantissa/core/error.h"
#include "mantissa/train/double_precision.h"
#include "mantissa/train/half_precision.h"
#include "mantissa/train/mixed_precision.h"

namespace mantissa::train {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

const std::vector<std::string>& supported_precisions() {
  static const std::vector<std::string> names = {"32-true",    "64-true", "16-mixed",
                                                 "bf16-mixed", "16-true", "bf16-true"};
  return names;
}

const std::vector<std::string>& planned_precisions() {
  static const std::vector<std::string> names = {
      "transformer-engine", "transformer-engine-float16", "nf4", "nf4-dq", "fp4", "fp4-dq", "int8",
      "int8-training"};
  return names;
}

std::string normalize_precision(const std::string& value) {
  if (value == "32" || value == "64") return value + "-true";
  if (value == "16" || value == "bf16") {
    const std::string canonical = value + "-mixed";
    // Lightning warns for the aliases that meant mixed precision (docs/trainer.md).
    fmt::print(stderr,
               "mantissa: warning: `precision={}` is supported for historical reasons but its "
               "usage is discouraged; use '{}'\n",
               value, canonical);
    return canonical;
  }
  if (contains(supported_precisions(), value)) return value;
  if (contains(planned_precisions(), value)) {
    fail("precision",
         "'{}' is recognised but not implemented yet (its plugin does not exist in this build); "
         "valid values are: {}",
         value, fmt::join(supported_precisions(), ", "));
  }
  fail("precision",
       "unknown precision '{}'; valid values are: {} (legacy aliases: 16, 32, 64, bf16; "
       "recognised but not implemented yet: {})",
       value, fmt::join(supported_precisions(), ", "), fmt::join(planned_precisions(), ", "));
}

void check_accelerator(const std::string& accelerator) {
  if (accelerator == "cpu" || accelerator == "auto") return;
  if (accelerator == "gpu" || accelerator == "cuda" || accelerator == "mps" ||
      accelerator == "tpu") {
    fail("Trainer",
         "accelerator '{}' is not available: mantissa has no {} backend yet; use "
         "accelerator='cpu' or 'auto'",
         accelerator,
         accelerator == "gpu" || accelerator == "cuda" ? std::string("CUDA") : accelerator);
  }
  fail("Trainer", "unknown accelerator '{}'; valid values are: cpu, auto (gpu, cuda: planned)",
       accelerator);
}

std::unique_ptr<Precision> precision_plugin_from_string(const std::string& value,
                                                        const std::string& accelerator) {
  check_accelerator(accelerator);
  const std::string name = normalize_precision(value);
  if (name == "32-true") return std::make_unique<Precision>();
  if (name == "64-true") return std::make_unique<DoublePrecision>();
  if (name == "16-true" || name == "bf16-true") return std::make_unique<HalfPrecision>(name);
  return std::make_unique<MixedPrecision>(name);
}

}  // namespace mantissa::train
