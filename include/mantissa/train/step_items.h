#pragma once
// Whether an optimizer step under an item-weighted loss (TrainModule::loss_items) has nothing
// to learn from: its batches hold no item at all (on any rank with
// TrainerOptions::average_items_across_ranks; in the one process otherwise; under ddp without
// it, a rank without items still steps with the others, its 0 in their mean, as PyTorch DDP
// does). Such a step has no loss (transformers' Trainer divides by 0 items): its step_losses()
// entry is NaN, and a module logs no loss for it. Valid from the step's first training_step
// to its end.
#include "mantissa/train/trainer.h"

namespace mantissa::train {

inline bool step_has_no_items(const Trainer& trainer) {
  return trainer.item_loss_scale() == 0 &&
         (trainer.options().average_items_across_ranks || trainer.strategy().world_size() == 1);
}

}  // namespace mantissa::train
