#pragma once
// The Trainer flags of `mantissa train` checked in the flags' own names, before the Trainer and
// its callbacks check the same values in theirs ("[EarlyStopping] patience must be >= 0",
// "Trainer(amp_backend='apex', precision='32-true')"), words a command-line user never typed.
#include <cstdint>
#include <optional>

#include "mantissa/recipes/image_run.h"

namespace mantissa::recipes {

// Throws mantissa::Error tagged `where` ("train") naming the flag, its value and the values it
// takes, for: --early-stopping-patience < 0, --early-stopping-min-delta not finite,
// --early-stopping-mode / --checkpoint-mode other than min or max, --save-top-k < -1,
// --every-n-train-steps < 0, --fast-dev-run < 0, --check-val-every-n-epoch < 1,
// --num-sanity-val-steps < -1, --gradient-clip-algorithm other than norm or value,
// --amp-backend other than native or apex, --amp-backend apex without --precision 16-mixed,
// --amp-level other than O0-O3, or given without --amp-backend apex; an unknown --profiler,
// --strategy, --accelerator, --float32-matmul-precision or --optimizer (with the likely name).
void check_trainer_flags(const TrainOptions& o, const char* where);

// --eval-interval (optimizer steps between validations; train's GPT and finetune): below 1 is
// refused (0 validated after every step; --limit-val-batches 0 turns validation off), and so is
// beside a --val-check-interval of `o`, which sets the same thing (one of the two was ignored).
// Errors tagged `where`.
void check_eval_interval(const std::optional<int64_t>& eval_interval, const TrainOptions& o,
                         const char* where);

}  // namespace mantissa::recipes
