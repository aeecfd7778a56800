#pragma once
// The range of a module's floating-point parameters, for the checks that a run or a loaded
// checkpoint holds usable weights (trainer.cpp: divergence under a loss scaler; checkpoint.cpp:
// damaged files).
#include <string>

#include "mantissa/nn/module.h"

namespace mantissa::train {

struct ParameterRange {
  double largest = 0;           // the largest |value| over the finite parameters
  std::string largest_name;     // the parameter holding it
  std::string non_finite_name;  // the first parameter holding NaN or inf; empty when none
  double non_finite_value = 0;  // a non-finite value it holds
};

ParameterRange parameter_range(const nn::Module& module);

}  // namespace mantissa::train
