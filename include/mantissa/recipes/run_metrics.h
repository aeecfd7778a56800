#pragma once
// The command's name for what a run reports: models::TrainMetrics
// (mantissa/models/train_metrics.h), which the library's TrainModules fill in, and its printing and
// JSON writing.
#include "mantissa/models/train_metrics.h"

namespace mantissa::recipes {
using models::format_summary;
using models::TrainMetrics;
using models::write_metrics_json;
}  // namespace mantissa::recipes
