#pragma once
// A TrainModule reused by a second Trainer of another precision: a bf16-true fit leaves its
// parameters bfloat16, and a 32-true Trainer does not convert them back (nor does Lightning's),
// so its forward would fail deep inside with "[linear] expected both operands to have the
// same dtype, got float32 and bfloat16", naming neither the cause nor the fix. Trainer::setup
// calls this after the new plugin's convert_module to say both up front.
#include <string>

#include "mantissa/core/dtype.h"
#include "mantissa/nn/module.h"
#include "mantissa/train/precision.h"

namespace mantissa::train {

// Throws when `module`, last converted by the precision `earlier` (whose parameters are
// `earlier_dtype`), still holds floating parameters of that dtype although `plugin` expects
// its own param_dtype(). Nothing is checked when the earlier dtype was float32 (modules are
// built in it and every plugin converts from it; LoRA adapters stay float32 on purpose) or
// equals the plugin's.
void check_not_left_in_earlier_precision(const nn::Module& module, const std::string& earlier,
                                         DType earlier_dtype, const Precision& plugin);

}  // namespace mantissa::train
