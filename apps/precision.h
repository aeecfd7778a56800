#pragma once
// The --precision flag: canonical names, legacy aliases, and what each one means for training
// (parameter dtype, autocast dtype, loss scaling).
#include <optional>
#include <string>
#include <vector>

#include "mantissa/core/dtype.h"

namespace mantissa::app {

struct PrecisionChoice {
  std::string canonical;                // "32-true", "bf16-mixed", ...
  DType param_dtype = kFloat32;         // dtype parameters are stored in
  std::optional<DType> autocast_dtype;  // set for the "-mixed" precisions
  bool grad_scaler = false;             // dynamic loss scaling ("16-mixed")
};

// Names `mantissa train` runs today, in the order the error message lists them.
const std::vector<std::string>& supported_precisions();

// Parses a --precision value. Legacy aliases (16, 32, 64, bf16) are accepted with a warning
// naming the canonical value; anything else throws mantissa::Error listing the valid values.
PrecisionChoice parse_precision(const std::string& value);

}  // namespace mantissa::app
