#pragma once
// `mantissa train --lr-find`: the learning-rate range test (train/lr_finder.h) on the run's
// model, precision, optimizer and data, in place of the training: the lr rises over
// --lr-find-steps optimizer steps across --lr-find-range, the losses are printed, the suggested
// lr is named, and --lr-find-plot draws them (docs/cli.md, "Finding a learning rate"). Shared by
// the image and GPT runs.
#include <memory>

#include "mantissa/models/train_metrics.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/train/lr_finder.h"

namespace mantissa::recipes {

// Null without --lr-find. Else checks the --lr-find flags and what cannot go with them
// (--resume, --checkpoint-dir, --fast-dev-run, --overfit-batches), and sets the Trainer options
// for the sweep: its length, no validation, no minimum or time limit, the finder among the
// callbacks. The caller passes no validation loader and keeps the sweep's divergence.
std::shared_ptr<train::LearningRateFinder> setup_lr_find(const TrainOptions& o,
                                                         train::TrainerOptions& t);

// After the sweep's fit: prints the losses and the suggested lr, writes --lr-find-plot (rank 0)
// and records the sweep in m.lr_find for the metrics JSON.
void report_lr_find(const train::LearningRateFinder& finder, const TrainOptions& o,
                    const std::string& model_text, bool is_global_zero, TrainMetrics& m);

}  // namespace mantissa::recipes
