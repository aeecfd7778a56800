#pragma once
// The --precision flag: canonical names, legacy aliases, and which ones this build can run.
#include <string>
#include <vector>

#include "mantissa/core/dtype.h"

namespace mantissa::app {

struct PrecisionChoice {
  std::string canonical;  // "32-true", "64-true", ...
  DType param_dtype;      // dtype of parameters and activations
};

// Names `mantissa train` runs today.
const std::vector<std::string>& supported_precisions();

// Parses a --precision value. Legacy aliases ("32", "64") are accepted with a warning that
// names the canonical value; anything else throws mantissa::Error listing the valid values.
PrecisionChoice parse_precision(const std::string& value);

}  // namespace mantissa::app
