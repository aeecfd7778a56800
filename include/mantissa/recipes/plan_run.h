#pragma once
// `mantissa plan` as a library call: its options checked and settled, and the model of each
// precision's dry runs (memory_plan.h plans with them; the command prints the tables).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mantissa/recipes/memory_plan.h"
#include "mantissa/recipes/precision_settings.h"

namespace mantissa::recipes {

struct PlanOptions {
  PlanModel model;     // the model, optimizer and quantization flags of the dry runs
  std::string memory;  // the budget: "8GiB", "512MiB", ...
  std::vector<std::string> precisions;  // as given (names or aliases)
  std::optional<int64_t> max_batch;     // unset: the training set's size (image models), or 65536
  int64_t verify_up_to = 2048;          // see plan_largest_batch
  bool batch_given = false;             // --batch-size (gpt: the width/depth plan's batch)
  PrecisionSettings fp8;                // the transformer-engine dry runs' --fp8-* settings
};

// What the plan runs with, once its options are checked.
struct PlanSetup {
  int64_t budget = 0;                   // bytes
  std::vector<std::string> precisions;  // canonical names, in the order given
  int64_t max_batch = 0;                // the largest batch considered
  int64_t data_set_size = 0;            // the image models' training set (0 for the gpt)
  int64_t gpt_batch_size = 0;           // the batch of the GPT's width/depth plan
};

// Checks the options in the flags' names (the budget, the model name, --max-batch, flags that
// apply to the gpt only, precisions named twice or none, quantization and --fp8-* flags no
// precision takes), applies --threads and spells --quant-ignore as the model's names. Throws,
// tagged "[plan]".
PlanSetup prepare_plan(PlanOptions& options);

// The model of `precision`'s batch plan (its --fp8-* settings when it has FP8 layers), and of
// its GPT width/depth plan (at setup.gpt_batch_size).
PlanModel plan_model_for(const PlanOptions& options, const std::string& precision);
PlanModel gpt_shape_model_for(const PlanOptions& options, const PlanSetup& setup,
                              const std::string& precision);

}  // namespace mantissa::recipes
