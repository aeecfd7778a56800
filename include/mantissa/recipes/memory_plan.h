#pragma once
// `mantissa plan` (docs/memory_planner.md): what fits in a memory budget, per precision, found
// from dry runs -- two optimizer steps of the real training code (run_training /
// run_gpt_training, so the same model, plugin, optimizer and module) on synthetic data, with
// the counting allocator's peak. No data set is read and nothing is trained to the end.
//
// The peak of a step grows linearly with the batch (activations and the batch itself; weights,
// gradients and optimizer state do not depend on it), so two dry runs at small batches give
// the line and the largest batch under the budget; that batch is then dry-run itself (when it
// is at most `verify_up_to`) and corrected until it fits and one more sample would not. A batch
// beyond `verify_up_to` is extrapolated from dry runs at verify_up_to / 2 and verify_up_to
// (the slope at small batches underestimates large ones). For the GPT, depth enters linearly
// and width quadratically: dry runs fit the curve, and the planned depth and width are then
// dry-run themselves and stepped down until they fit.
#include <cstdint>
#include <string>
#include <vector>

#include "mantissa/recipes/gpt_run.h"
#include "mantissa/recipes/image_run.h"

namespace mantissa::recipes {

// The training peak of one dry run (bytes above the synthetic data set), split by what holds
// it at the end of the step. activations() is the rest: activations kept for backward,
// autocast's weight copies, the batch and temporaries.
struct StepMemory {
  int64_t batch = 0;
  int64_t peak = 0;
  int64_t weights = 0;
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  int64_t activations() const { return peak - weights - gradients - optimizer_state; }
};

// What to plan for: the training options of the model (precision, optimizer, model shape) and,
// for --model gpt, its options.
struct PlanModel {
  TrainOptions train;
  GptOptions gpt;
};

// Two optimizer steps at `batch` on synthetic data; the peak and its split.
StepMemory measure_step_memory(const PlanModel& model, int64_t batch);

struct BatchPlan {
  std::string precision;
  int64_t batch = 0;  // 0: not even batch 1 fits
  StepMemory memory;  // at `batch` (measured, or extrapolated when !measured)
  bool measured = false;
  // The slope of the peak where it grows with the batch (0: it did not grow up to
  // verify_up_to), a mean over many samples, so fractional.
  double bytes_per_sample = 0;
};

// The largest batch (at most max_batch) whose dry-run peak stays within budget. An image model's
// caller passes at most the training set's size: a batch cannot hold more samples than that.
BatchPlan plan_largest_batch(const PlanModel& model, int64_t budget, int64_t max_batch,
                             int64_t verify_up_to);

// GPT at a fixed batch: the largest --width (a multiple of --heads; --layers as given) and the
// largest --layers (--width as given) that fit.
struct GptShapePlan {
  int64_t width = 0;
  StepMemory at_width;
  int64_t layers = 0;
  StepMemory at_layers;
};
GptShapePlan plan_largest_gpt_shape(const PlanModel& model, int64_t budget);

// The table `mantissa plan` prints. max_batch is the cap the plans were made with; when it is
// the training set's size (data_set_size, 0 for none known) a batch at the cap reads as "the
// whole training set fits".
std::string batch_plan_table(const std::vector<BatchPlan>& plans, int64_t budget, int64_t max_batch,
                             int64_t data_set_size = 0);

}  // namespace mantissa::recipes
