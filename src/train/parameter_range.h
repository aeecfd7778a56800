#pragma once
// The range of a module's floating-point parameters, for the checks that a run or a loaded
// checkpoint holds usable weights (trainer_divergence_checks.cpp: a run that diverged;
// checkpoint.cpp: damaged files).
#include <optional>
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

// A non-finite value the floating tensor `t` holds (NaN when it holds one, else inf), nullopt
// when every value is finite: the test parameter_range applies to each parameter, and the HF
// loader and the peft adapter loader to each tensor they read (a damaged file is refused at
// load, not blamed on the learning rate at the first step).
std::optional<double> non_finite_value(const Tensor& t);

// The first floating tensor of the quantized layers' stored weights (4-bit absmax, quant_map,
// nested_absmax, nested_quant_map; int8 SCB: the scales and code books, not the integer codes)
// that holds NaN or inf, as "h0.attn.in_proj.base_layer.weight.absmax"; empty name when none.
// They are buffers, which parameter_range does not see, and frozen: only a damaged file puts a
// non-finite value there.
struct NonFiniteTensor {
  std::string name;
  double value = 0;
};
NonFiniteTensor non_finite_quantized_state(const nn::Module& module);

// The first float scale of the quantized layers' stored weights (4-bit absmax and
// nested_absmax, int8 SCB) that holds a negative value, and its most negative one; empty name
// when none. Each is a largest magnitude (of a block, of a row): a negative one flips the sign
// of the weights it scales, so the file is damaged, though every value is finite.
NonFiniteTensor negative_quantized_scale(const nn::Module& module);

}  // namespace mantissa::train
