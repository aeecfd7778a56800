#include "ignored_flags.h"

#include <fmt/format.h>

#include "mantissa/core/warning.h"

namespace mantissa::app {

std::vector<IgnoredFlag> ignored_flags(const recipes::TrainOptions& o) {
  std::vector<IgnoredFlag> out;
  auto ignore = [&](std::initializer_list<const char*> flags, bool ignored,
                    const std::string& why) {
    if (!ignored) return;
    for (const char* flag : flags) out.push_back({flag, why});
  };
  const bool gpt = o.model == "gpt";
  const std::string ignores = fmt::format(": --model {} ignores it", o.model);
  ignore({"--patch", "--pool"}, o.model != "vit", "applies to --model vit only" + ignores);
  ignore({"--hidden"}, o.model != "mlp",
         "sets the hidden sizes of --model mlp only" + ignores +
             (gpt ? " (its size is --layers, --width, --heads)" : " (its sizes are fixed)"));
  ignore({"--text", "--sample-prompt", "--sample-tokens", "--eval-interval", "--warmup-steps",
          "--layers", "--width", "--heads", "--context", "--activation-checkpointing"},
         !gpt, "applies to --model gpt only" + ignores);
  ignore({"--cuda-graphs"}, !gpt,
         "applies to --model gpt only" + ignores +
             " (the image models' training_step reads the batch's accuracy on the host, which a "
             "graph cannot replay)");
  // The image models' data and schedule, which the GPT replaces with its own.
  ignore(
      {"--train-subset"}, gpt,
      "counts the training images of the image models" + ignores + " (use --limit-train-batches)");
  ignore({"--data-dir"}, gpt,
         "is the Fashion-MNIST directory of the image models" + ignores + " (it reads --text)");
  ignore({"--lr-schedule"}, gpt,
         "applies to the image models only" + ignores +
             " (it always warms up over --warmup-steps, then decays with a cosine)");
  ignore({"--lora-alpha", "--lora-dropout"}, o.quant.lora_rank == 0,
         "has no effect without --lora-rank (no adapters are added)");
  ignore({"--early-stopping-mode", "--early-stopping-patience", "--early-stopping-min-delta"},
         o.early_stopping_monitor.empty(),
         "has no effect without --early-stopping-monitor (no metric is watched, so the run "
         "never stops early)");
  ignore({"--min-epochs", "--min-steps"}, o.early_stopping_monitor.empty() && o.max_time.empty(),
         "has no effect without --early-stopping-monitor or --max-time (nothing asks the run to "
         "stop before its --epochs or --max-steps)");
  ignore({"--checkpoint-mode"}, o.checkpoint_monitor.empty(),
         "has no effect without --checkpoint-monitor (checkpoints are kept newest first, not "
         "ranked by a metric)");
  ignore({"--save-top-k"}, o.checkpoint_dir.empty(),
         "has no effect without --checkpoint-dir (no checkpoints are written)");
  ignore({"--overwrite-output-dir"}, o.checkpoint_dir.empty() && o.metrics_json.empty(),
         "has no effect without --checkpoint-dir or --metrics-json (the outputs it lets a run "
         "replace)");
  ignore({"--log-dir"}, o.logger.empty(), "has no effect without --logger (nothing is logged)");
  ignore({"--lr-find-range", "--lr-find-steps", "--lr-find-plot"}, !o.lr_find,
         "has no effect without --lr-find (the run trains)");
  // The sweep sets the lr of every step and its own length, and validates nothing.
  ignore({"--lr", "--lr-schedule", "--epochs", "--max-steps", "--max-time", "--warmup-steps",
          "--val-check-interval", "--limit-val-batches", "--limit-test-batches",
          "--check-val-every-n-epoch", "--eval-interval", "--early-stopping-monitor",
          "--sample-prompt", "--sample-tokens", "--save-weights"},
         o.lr_find,
         "has no effect with --lr-find (the sweep sets every step's lr and its own length, "
         "--lr-find-steps, and validates nothing)");
  ignore({"--init-from"}, !o.resume.empty(),
         "has no effect with --resume: the checkpoint restores every weight of the run it "
         "continues, which began from its own --init-from");
  return out;
}

void warn_ignored_flags(const CLI::App& cmd, const recipes::TrainOptions& o) {
  for (const IgnoredFlag& f : ignored_flags(o)) {
    if (cmd.get_option(f.flag)->count() > 0) warn(fmt::format("{} {}", f.flag, f.why));
  }
}

std::vector<std::string> ignored_flag_names(const recipes::TrainOptions& o) {
  std::vector<std::string> names;
  for (const IgnoredFlag& f : ignored_flags(o)) names.push_back(f.flag.substr(2));
  return names;
}

}  // namespace mantissa::app
