#include "plan_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "comma_list.h"
#include "fp8_options.h"
#include "mantissa/core/allocator.h"
#include "mantissa/core/error.h"
#include "mantissa/data/fashion_mnist.h"
#include "mantissa/recipes/byte_size.h"
#include "mantissa/recipes/finetuning.h"
#include "mantissa/recipes/memory_plan.h"
#include "mantissa/recipes/model_names.h"
#include "mantissa/recipes/multi_precision_flags.h"
#include "mantissa/recipes/precision_settings.h"
#include "mantissa/recipes/thread_count.h"
#include "mantissa/train/precision_registry.h"
#include "quant_options.h"
#include "threads_option.h"

namespace mantissa::app {

// The runs these commands start and what they report (recipes/).
using namespace recipes;
namespace {

struct PlanArgs {
  PlanModel model;
  std::string memory;
  std::string precisions = "32-true,16-mixed,bf16-mixed,16-true,bf16-true";
  std::optional<int64_t> max_batch;  // unset: the training set's size (image models), or 65536
  int64_t verify_up_to = 2048;
  bool batch_given = false;
  PrecisionSettings fp8;  // --fp8-*: the transformer-engine dry runs' recipe, as train's
};

void run_plan(PlanArgs& a) {
  const int64_t budget = parse_byte_size(a.memory, "--memory");
  TrainOptions& o = a.model.train;
  check_model_name(o.model, "plan");
  if (o.model == "vit") check_vit_patch(o.vit_patch, "plan");
  o.quant.quant_ignore = quant_ignore_for_model(o.quant.quant_ignore, o.model);
  MANTISSA_CHECK(!a.max_batch || *a.max_batch >= 1, "plan",
                 "--max-batch must be at least 1, got {}", a.max_batch.value_or(0));
  // A batch holds at most the training set: an image model's plan is capped at Fashion-MNIST's
  // 60000 training images (the GPT's windows depend on its text, which plan does not read).
  const int64_t data_set_size = o.model == "gpt" ? 0 : data::FashionMNIST::kTrainSize;
  const int64_t max_batch = o.model == "gpt"
                                ? a.max_batch.value_or(65536)
                                : std::min(a.max_batch.value_or(data_set_size), data_set_size);
  // For an image model the plan is the batch itself, so a --batch-size there would go unused.
  MANTISSA_CHECK(!a.batch_given || o.model == "gpt", "plan",
                 "--batch-size applies to --model gpt only (the batch of its width and depth "
                 "plan); for --model {} plan finds the largest batch itself (cap it with "
                 "--max-batch)",
                 o.model);
  MANTISSA_CHECK(!a.model.gpt.activation_checkpointing || o.model == "gpt", "plan",
                 "--activation-checkpointing applies to --model gpt only");
  apply_thread_count(o.threads);
  const std::vector<std::string> precisions = split_comma_list(a.precisions);
  MANTISSA_CHECK(!precisions.empty(), "plan", "--precisions names no precision");
  std::vector<std::string> names;
  for (const std::string& p : precisions) names.push_back(train::normalize_precision(p));
  // As bench and compare refuse it: a name given twice (also via a legacy alias) would only
  // plan the same precision twice, with twice the dry runs.
  recipes::check_no_precision_twice(precisions, names, "plan");
  recipes::check_quant_options_apply(names, o.quant, "plan");
  check_settings_apply_to_some(names, a.fp8, "plan");
  fmt::print("mantissa plan: model {}, budget {} ({} bytes); dry runs of two optimizer steps\n",
             o.model, format_bytes(budget), budget);
  std::vector<BatchPlan> plans;
  for (const std::string& p : names) {
    PlanModel m = a.model;
    m.train.precision = p;
    m.train.precision_options = settings_for(p, a.fp8);
    plans.push_back(plan_largest_batch(m, budget, max_batch, a.verify_up_to));
  }
  fmt::print("\nLargest batch per precision:\n{}",
             batch_plan_table(plans, budget, max_batch, data_set_size));
  if (o.model != "gpt") return;
  if (!a.batch_given) o.batch_size = 16;
  fmt::print(
      "\nGPT at batch {} (context {}, {} heads): largest width with {} layers, largest "
      "depth at width {}:\n",
      o.batch_size, a.model.gpt.context, a.model.gpt.heads, a.model.gpt.layers, a.model.gpt.width);
  // As wide as the longest precision name, as the batch table above.
  size_t w = 12;
  for (const std::string& p : names) w = std::max(w, p.size());
  fmt::print("{:<{}} {:>10} {:>12} {:>10} {:>12}\n", "precision", w, "width", "peak", "layers",
             "peak");
  for (const std::string& p : names) {
    PlanModel m = a.model;
    m.train.precision = p;
    m.train.precision_options = settings_for(p, a.fp8);
    const GptShapePlan s = plan_largest_gpt_shape(m, budget);
    fmt::print("{:<{}} {:>10} {:>12} {:>10} {:>12}\n", p, w, s.width, format_bytes(s.at_width.peak),
               s.layers, format_bytes(s.at_layers.peak));
  }
  fmt::print(
      "(fitted to dry runs at small widths and at 1 and 2 layers, then dry-run at the "
      "planned width and depth)\n");
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Largest batch (and GPT width/depth) per precision that fits a memory budget");
  TrainOptions& o = a->model.train;
  GptOptions& g = a->model.gpt;
  cmd->add_option("--model", o.model, "mlp, cnn, vit or gpt")->capture_default_str();
  // --memory-limit as train spells the budget it enforces.
  cmd->add_option("--memory,--memory-limit", a->memory, "The budget: 8GiB, 512MiB, 1.5GB, ...")
      ->required();
  cmd->add_option("--precisions", a->precisions, "Comma-separated precisions to plan for")
      ->check(comma_list(precision_items()))
      ->capture_default_str();
  cmd->add_option("--optimizer", o.optimizer, "adamw, adam, sgd, adamw8bit or adam8bit")
      ->capture_default_str();
  cmd->add_option("--hidden", o.hidden, "mlp: hidden sizes, comma separated")
      ->check(comma_list(hidden_size_items()))
      ->capture_default_str();
  // The dry runs are training steps of the same recipe as train's: adapters and the quantized
  // layers' settings change the plan (QLoRA's frozen 4-bit weights and small trainable state).
  add_quant_options(*cmd, o.quant, /*training=*/false);
  add_fp8_options(cmd, &a->fp8);
  cmd->add_option("--patch", o.vit_patch, "vit: patch size (4 or 7)")->capture_default_str();
  cmd->add_option("--pool", o.vit_pool, "vit: cls or mean")->capture_default_str();
  cmd->add_option("--layers", g.layers, "gpt: transformer blocks")->capture_default_str();
  cmd->add_option("--width", g.width, "gpt: embedding width")->capture_default_str();
  cmd->add_option("--heads", g.heads, "gpt: attention heads")->capture_default_str();
  cmd->add_option("--context", g.context, "gpt: context length in bytes")->capture_default_str();
  cmd->add_flag("--activation-checkpointing", g.activation_checkpointing,
                "gpt: plan with each block checkpointed (as train's flag)");
  cmd->add_option_function<int64_t>(
      "--batch-size",
      [a](int64_t b) {
        a->model.train.batch_size = b;
        a->batch_given = true;
      },
      "gpt: the batch of the width/depth plan (default 16)");
  cmd->add_option("--max-batch", a->max_batch,
                  "Largest batch considered (default: the training set, 60000 images, for mlp, cnn "
                  "and vit; 65536 for gpt); an image model's is at most 60000)");
  cmd->add_option("--verify-up-to", a->verify_up_to,
                  "Dry-run the planned batch itself when it is at most this (larger ones are "
                  "extrapolated from dry runs at half of it and at it)")
      ->capture_default_str();
  cmd->add_option("--threads", o.threads, "Worker threads (default: all cores)");
  cmd->callback([a] { run_plan(*a); });
}

}  // namespace mantissa::app
