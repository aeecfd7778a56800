#pragma once
// A checkpoint's optimizer state tensors against the dtypes their parameters and optimizers
// imply: Adam's and SGD's moments in the parameter's dtype or fp32 (HalfPrecisionOptions), the
// 8-bit optimizers' uint8 codes and fp32 absmax and moments, fp32 master weights.
// Optimizer::load_state_dict converts floating state of another dtype value by value (as torch
// does), so an exp_avg stored as BF16 and relabelled F16 in the header resumed as other numbers
// without a word.
#include <memory>
#include <string>
#include <vector>

#include "mantissa/nn/module.h"
#include "mantissa/optim/optimizer.h"

namespace mantissa::train {

// Throws mantissa::Error from "checkpoint" naming `source`, the tensor ("optimizer.<i>.state.
// <j>.<buffer>"), its parameter, the stored dtype and the expected one. `saved_model`: the
// file's weights (their dtypes are those the state was written for; a parameter the file lacks
// counts with its live dtype). A state dict too damaged to map its tensors to parameters is
// left to load_state_dict, which names what is wrong, and so is the state of an optimizer class
// other than mantissa's own (Adam, AdamW, SGD, Adam8bit, AdamW8bit).
void check_optimizer_state_dtypes(const nn::Module& module,
                                  const std::vector<std::shared_ptr<optim::Optimizer>>& optimizers,
                                  const std::vector<optim::OptimizerState>& saved,
                                  const nn::StateDict& saved_model, const std::string& source);

}  // namespace mantissa::train
