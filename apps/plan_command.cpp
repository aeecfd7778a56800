#include "plan_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "comma_list.h"
#include "fp8_options.h"
#include "mantissa/core/allocator.h"
#include "mantissa/recipes/plan_run.h"
#include "quant_options.h"
#include "threads_option.h"

namespace mantissa::app {

// The runs these commands start and what they report (recipes/).
using namespace recipes;
namespace {

// The flags; the list of precisions as one comma-separated value.
struct PlanArgs {
  PlanOptions plan;
  std::string precisions = "32-true,16-mixed,bf16-mixed,16-true,bf16-true";
};

void print_plan(PlanArgs& args) {
  PlanOptions& a = args.plan;
  a.precisions = split_comma_list(args.precisions);
  const PlanSetup s = prepare_plan(a);
  const TrainOptions& o = a.model.train;
  fmt::print("mantissa plan: model {}, budget {} ({} bytes); dry runs of two optimizer steps\n",
             o.model, format_bytes(s.budget), s.budget);
  std::vector<BatchPlan> plans;
  for (const std::string& p : s.precisions)
    plans.push_back(
        plan_largest_batch(plan_model_for(a, p), s.budget, s.max_batch, a.verify_up_to));
  fmt::print("\nLargest batch per precision:\n{}",
             batch_plan_table(plans, s.budget, s.max_batch, s.data_set_size));
  if (o.model != "gpt") return;
  fmt::print(
      "\nGPT at batch {} (context {}, {} heads): largest width with {} layers, largest "
      "depth at width {}:\n",
      s.gpt_batch_size, a.model.gpt.context, a.model.gpt.heads, a.model.gpt.layers,
      a.model.gpt.width);
  // As wide as the longest precision name, as the batch table above.
  size_t w = 12;
  for (const std::string& p : s.precisions) w = std::max(w, p.size());
  fmt::print("{:<{}} {:>10} {:>12} {:>10} {:>12}\n", "precision", w, "width", "peak", "layers",
             "peak");
  for (const std::string& p : s.precisions) {
    const GptShapePlan shape = plan_largest_gpt_shape(gpt_shape_model_for(a, s, p), s.budget);
    fmt::print("{:<{}} {:>10} {:>12} {:>10} {:>12}\n", p, w, shape.width,
               format_bytes(shape.at_width.peak), shape.layers, format_bytes(shape.at_layers.peak));
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
  TrainOptions& o = a->plan.model.train;
  GptOptions& g = a->plan.model.gpt;
  cmd->add_option("--model", o.model, "mlp, cnn, vit or gpt")->capture_default_str();
  // --memory-limit as train spells the budget it enforces.
  cmd->add_option("--memory,--memory-limit", a->plan.memory, "The budget: 8GiB, 512MiB, 1.5GB, ...")
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
  add_fp8_options(cmd, &a->plan.fp8);
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
        a->plan.model.train.batch_size = b;
        a->plan.batch_given = true;
      },
      "gpt: the batch of the width/depth plan (default 16)");
  cmd->add_option("--max-batch", a->plan.max_batch,
                  "Largest batch considered (default: the training set, 60000 images, for mlp, cnn "
                  "and vit; 65536 for gpt); an image model's is at most 60000)");
  cmd->add_option("--verify-up-to", a->plan.verify_up_to,
                  "Dry-run the planned batch itself when it is at most this (larger ones are "
                  "extrapolated from dry runs at half of it and at it)")
      ->capture_default_str();
  cmd->add_option("--threads", o.threads, "Worker threads (default: all cores)");
  cmd->callback([a] { print_plan(*a); });
}

}  // namespace mantissa::app
