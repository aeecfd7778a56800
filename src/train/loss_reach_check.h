#pragma once
// The first training step's check that its loss can train the model (Trainer::train_batch,
// before the backward): the loss's graph must reach at least one of the tensors the module and
// its optimizer train. A model whose forward calls layers through member pointers kept from its
// constructor runs the layers a precision plugin, apply_lora or replace_modules swapped out of
// its slots; its loss then reaches none of the new layers' tensors (nf4's trainable biases,
// LoRA's adapters) and every step is a silent no-op (docs/trainer.md, "Swapped layers").
#include <string>

#include "mantissa/core/tensor.h"
#include "mantissa/nn/module.h"
#include "mantissa/optim/optimizer.h"

namespace mantissa::train::detail {

// Throws mantissa::Error when `loss` reaches none of the trainable tensors of `module` and
// `optimizer` (or there are none); warns when it misses some of the module's while reaching
// tensors that require grad outside both, the mark of a partly bypassed replacement.
// `precision` names the run's precision in the message.
void check_loss_reaches_parameters(const Tensor& loss, const nn::Module& module,
                                   const optim::Optimizer& optimizer, const std::string& precision);

}  // namespace mantissa::train::detail
