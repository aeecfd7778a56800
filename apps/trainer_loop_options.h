#pragma once
// The Trainer's loop flags that `train` and `finetune` share: accumulation, clipping,
// checkpoints and --resume, batch limits, validation interval, progress bar, loggers, profiler,
// early stopping and the checkpoint monitor (mantissa/recipes/trainer_setup.h reads them).
#include <CLI/CLI.hpp>

#include "mantissa/recipes/image_run.h"

namespace mantissa::app {

// Adds the flags above into `o` (which must outlive the command).
void add_trainer_loop_options(CLI::App& cmd, recipes::TrainOptions& o);

}  // namespace mantissa::app
