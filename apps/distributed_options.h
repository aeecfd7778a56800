#pragma once
// The flags of a data-parallel or sharded run that `train` and `finetune` share (--devices,
// --strategy, gradient and parameter communication dtypes, buckets, prefetch, collective timeout,
// sharded checkpoints; docs/distributed.md), and the start of such a run: the checks of their
// combination, the restart under mpirun for --devices N, and the silencing of ranks other than 0.
#include <CLI/CLI.hpp>

#include "mantissa/recipes/image_run.h"

namespace mantissa::app {

// Adds the flags above into `o`, which must outlive the command.
void add_distributed_options(CLI::App& cmd, recipes::TrainOptions& o);

// Called first in the command's callback, before any work: refuses --ddp-bf16-compress beside
// another --grad-reduce-dtype, a device count below 1 and --devices N with a --config read from a
// stream; with --devices N > 1 outside an MPI job, runs the same command line under mpirun and
// exits with the job's status (does not return); inside a job, quiets ranks other than 0, then
// warns about --sharded-checkpoint without --checkpoint-dir.
// `command` names the command in the errors ("train", "finetune").
void start_distributed_run(const CLI::App& cmd, const recipes::TrainOptions& o,
                           const char* command);

}  // namespace mantissa::app
