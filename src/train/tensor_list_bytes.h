#pragma once
// A list of tensors as one byte string and back: how predict's outputs travel between the
// ranks of a ddp job (DDPStrategy::gather_over_ranks). Undefined tensors (a predict_step that
// returned nothing) keep their place; every tensor comes back contiguous on the CPU.
#include <string>
#include <string_view>
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa::train::detail {

std::string tensor_list_to_bytes(const std::vector<Tensor>& tensors);

// Throws when `bytes` is not what tensor_list_to_bytes wrote (truncated, a length past the end).
std::vector<Tensor> tensor_list_from_bytes(std::string_view bytes);

}  // namespace mantissa::train::detail
