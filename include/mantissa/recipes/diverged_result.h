#pragma once
// A run that trains to its end but whose final weights give a non-finite loss (NaN or inf) has
// diverged as surely as one whose loss became NaN in a step (which the Trainer stops with
// train::TrainingDiverged): its accuracy, curves and checkpoints describe a model that overflows.
// So that a script can tell it from a result, the runs record it in TrainMetrics::diverged (the
// metrics JSON's "diverged"); `mantissa train`
// then exits with status 4 and `mantissa compare` reports the precision as diverged.
#include <string>

#include "mantissa/recipes/run_metrics.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/trainer.h"

namespace mantissa::recipes {

// "" when `loss` (the final evaluation's "test" or "validation" loss) is finite; else what
// diverged, in which precision after how many steps, and what to try, by the precision: a lower
// --lr, gradient clipping, 16-mixed's GradScaler or bf16-mixed's range where float16 overflows.
std::string diverged_result_message(const char* evaluation, double loss, train::Trainer& trainer);

// A run the Trainer stopped in a step (train::TrainingDiverged out of fit): records the error's
// message as m.diverged, with the optimizer steps completed and the epoch it stopped in, so its
// metrics JSON is written with what the run had measured before the stop. The caller leaves the
// final evaluation out: the weights are not finite.
void record_stopped_by_divergence(const train::TrainingDiverged& error,
                                  const train::Trainer& trainer, TrainMetrics& m);

// A checkpoint the run could not write into --checkpoint-dir (train::CheckpointSaveFailed out of
// fit: the directory was removed, replaced by a file or made read-only during the run, or its
// disk filled). Returns the error said as the flag's: the file, the directory, the writer's
// reason, the step the run stopped after and what to do; and records that message as
// m.checkpoint_save_failed, so the caller writes the metrics JSON (what the run measured before
// the stop, final evaluation left out) before throwing it: the writer's words alone name no flag.
train::CheckpointSaveFailed checkpoint_dir_error(const train::CheckpointSaveFailed& error,
                                                 const train::Trainer& trainer, TrainMetrics& m);

}  // namespace mantissa::recipes
