#pragma once
// An optimizer state (its meta JSON and named tensors) as one byte string and back: how the
// ZeRO strategies move a rank's shard of the state to rank 0 for a checkpoint.
#include <string>

#include "mantissa/optim/optimizer.h"

namespace mantissa::train::detail {

std::string optimizer_state_to_bytes(const optim::OptimizerState& state);

// Throws when `bytes` is not what optimizer_state_to_bytes wrote.
optim::OptimizerState optimizer_state_from_bytes(const std::string& bytes);

}  // namespace mantissa::train::detail
