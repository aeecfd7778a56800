#pragma once
// The Trainer's loop flags that `train` and `finetune` share: accumulation, clipping,
// checkpoints and --resume, batch limits, validation interval, progress bar, loggers, profiler,
// early stopping and the checkpoint monitor (mantissa/recipes/trainer_setup.h reads them).
#include <CLI/CLI.hpp>

#include <memory>

#include "mantissa/recipes/image_run.h"

namespace mantissa::app {

// Adds the flags above into `*options`. The command holds `options` for as long as it lives (a
// flag's callback owns a reference), so the bound values stay valid whatever callback the
// command is given later.
void add_trainer_loop_options(CLI::App& cmd, const std::shared_ptr<recipes::TrainOptions>& options);

}  // namespace mantissa::app
