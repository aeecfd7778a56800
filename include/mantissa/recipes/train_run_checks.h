#pragma once
// `mantissa train`'s checks of a run's own files and sizes, said in the flags' names before
// anything is read or built (the Trainer and the GPT refuse these too, but name their own
// fields, which a command-line user never typed).
#include "mantissa/recipes/gpt_run.h"
#include "mantissa/recipes/image_run.h"

namespace mantissa::recipes {

// --init-from (when `init_from_given`) names a regular file, not a directory or a device;
// --save-weights is the gpt's only and its file can be written (rank 0);
// --accumulate-grad-batches is at least 1; --gradient-clip-val is 0 or a positive finite
// number; for --model gpt, --width and --heads are at least 1 and --width is divisible by
// --heads (the error names the head counts nearest the one given that divide it). Throws,
// tagged "[train]".
void check_train_run(const TrainOptions& o, const GptOptions& g, bool init_from_given);

}  // namespace mantissa::recipes
