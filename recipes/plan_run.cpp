// `mantissa plan` as a library call (see plan_run.h).
#include "mantissa/recipes/plan_run.h"

#include <algorithm>

#include "mantissa/core/error.h"
#include "mantissa/data/fashion_mnist.h"
#include "mantissa/recipes/byte_size.h"
#include "mantissa/recipes/finetuning.h"
#include "mantissa/recipes/model_names.h"
#include "mantissa/recipes/multi_precision_flags.h"
#include "mantissa/recipes/thread_count.h"
#include "mantissa/train/precision_registry.h"

namespace mantissa::recipes {

PlanSetup prepare_plan(PlanOptions& a) {
  PlanSetup s;
  s.budget = parse_byte_size(a.memory, "--memory");
  TrainOptions& o = a.model.train;
  check_model_name(o.model, "plan");
  if (o.model == "vit") check_vit_patch(o.vit_patch, "plan");
  o.quant.quant_ignore = quant_ignore_for_model(o.quant.quant_ignore, o.model);
  MANTISSA_CHECK(!a.max_batch || *a.max_batch >= 1, "plan",
                 "--max-batch must be at least 1, got {}", a.max_batch.value_or(0));
  // A batch holds at most the training set: an image model's plan is capped at Fashion-MNIST's
  // 60000 training images (the GPT's windows depend on its text, which plan does not read).
  s.data_set_size = o.model == "gpt" ? 0 : data::FashionMNIST::kTrainSize;
  s.max_batch = o.model == "gpt" ? a.max_batch.value_or(65536)
                                 : std::min(a.max_batch.value_or(s.data_set_size), s.data_set_size);
  // For an image model the plan is the batch itself, so a --batch-size there would go unused.
  MANTISSA_CHECK(!a.batch_given || o.model == "gpt", "plan",
                 "--batch-size applies to --model gpt only (the batch of its width and depth "
                 "plan); for --model {} plan finds the largest batch itself (cap it with "
                 "--max-batch)",
                 o.model);
  MANTISSA_CHECK(!a.model.gpt.activation_checkpointing || o.model == "gpt", "plan",
                 "--activation-checkpointing applies to --model gpt only");
  apply_thread_count(o.threads);
  MANTISSA_CHECK(!a.precisions.empty(), "plan", "--precisions names no precision");
  for (const std::string& p : a.precisions) s.precisions.push_back(train::normalize_precision(p));
  // As bench and compare refuse it: a name given twice (also via a legacy alias) would only
  // plan the same precision twice, with twice the dry runs.
  check_no_precision_twice(a.precisions, s.precisions, "plan");
  check_quant_options_apply(s.precisions, o.quant, "plan");
  check_settings_apply_to_some(s.precisions, a.fp8, "plan");
  s.gpt_batch_size = a.batch_given ? o.batch_size : 16;
  return s;
}

PlanModel plan_model_for(const PlanOptions& options, const std::string& precision) {
  PlanModel m = options.model;
  m.train.precision = precision;
  m.train.precision_options = settings_for(precision, options.fp8);
  return m;
}

PlanModel gpt_shape_model_for(const PlanOptions& options, const PlanSetup& setup,
                              const std::string& precision) {
  PlanModel m = plan_model_for(options, precision);
  m.train.batch_size = setup.gpt_batch_size;
  return m;
}

}  // namespace mantissa::recipes
