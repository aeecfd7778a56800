// The settings of a training run as hparams.yaml records them (run_hparams.h).
#include "mantissa/recipes/run_hparams.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "mantissa/io/output_path.h"
#include "mantissa/recipes/model_hparams.h"

namespace mantissa::recipes {
namespace {

// A batch limit as Lightning's limit_*_batches / val_check_interval hold it: a fraction as a
// float, a count as an int.
nlohmann::json batch_limit(const train::BatchLimit& b) {
  if (b.is_fraction()) return b.value();
  return static_cast<int64_t>(b.value());
}

// The LoRA and quantization settings of the flags.
nlohmann::json adapter_settings(const QuantOptions& q) {
  return {{"lora-rank", q.lora_rank},
          {"lora-alpha", q.lora_alpha},
          {"lora-dropout", q.lora_dropout},
          {"lora-targets", fmt::format("{}", fmt::join(q.lora_targets, ","))},
          {"quant-dtype", q.quant_dtype},
          {"quant-ignore", q.quant_ignore}};
}

// The optimizer steps between validations of a language-model run (--eval-interval): the
// Trainer's val_check_interval counts batches, accumulate_grad_batches to a step.
nlohmann::json eval_interval(const train::TrainerOptions& t) {
  if (t.val_check_interval.is_fraction()) return nullptr;
  return static_cast<int64_t>(t.val_check_interval.value()) / t.accumulate_grad_batches;
}

// A language-model run's (the GPT's, a fine-tune's): LanguageModel's warm-up + cosine schedule
// and its validations every --eval-interval optimizer steps.
nlohmann::json language_model_run_hparams(const TrainOptions& o, const train::TrainerOptions& t,
                                          int64_t warmup_steps, bool activation_checkpointing);

}  // namespace

nlohmann::json run_hparams(const TrainOptions& o, const train::TrainerOptions& t) {
  nlohmann::json j = {{"precision", o.precision},
                      {"optimizer", o.optimizer},
                      {"lr", o.lr},
                      {"weight-decay", o.weight_decay},
                      {"optim-bits-32", o.optim_bits_32},
                      {"lr-schedule", o.lr_schedule},
                      {"batch-size", o.batch_size},
                      {"accumulate-grad-batches", t.accumulate_grad_batches},
                      {"gradient-clip-val", t.gradient_clip_val},
                      {"gradient-clip-algorithm", t.gradient_clip_algorithm},
                      {"max-steps", t.max_steps},
                      {"epochs", t.max_epochs ? nlohmann::json(*t.max_epochs) : nullptr},
                      {"min-steps", t.min_steps},
                      {"min-epochs", t.min_epochs},
                      {"max-time", o.max_time},
                      {"limit-train-batches", batch_limit(t.limit_train_batches)},
                      {"limit-val-batches", batch_limit(t.limit_val_batches)},
                      {"val-check-interval", batch_limit(t.val_check_interval)},
                      {"seed", o.seed},
                      {"master-weights", o.master_weights},
                      {"stochastic-rounding", o.stochastic_rounding},
                      {"strategy", o.strategy},
                      {"devices", o.devices}};
  j.update(fp8_hparams(o));
  j.update(adapter_settings(o.quant));
  if (!o.early_stopping_monitor.empty()) {
    j["early-stopping-monitor"] = o.early_stopping_monitor;
    j["early-stopping-mode"] = o.early_stopping_mode;
    j["early-stopping-patience"] = o.early_stopping_patience;
    j["early-stopping-min-delta"] = o.early_stopping_min_delta;
  }
  return j;
}

namespace {

nlohmann::json language_model_run_hparams(const TrainOptions& o, const train::TrainerOptions& t,
                                          int64_t warmup_steps, bool activation_checkpointing) {
  nlohmann::json j = run_hparams(o, t);
  j["lr-schedule"] = "warmup-cosine";
  j["warmup-steps"] = warmup_steps;
  j["eval-interval"] = eval_interval(t);
  j["activation-checkpointing"] = activation_checkpointing;
  return j;
}

}  // namespace

nlohmann::json finetune_run_hparams(const TrainOptions& o, const FinetuneOptions& f,
                                    const train::TrainerOptions& t) {
  nlohmann::json j = language_model_run_hparams(o, t, f.warmup_steps, f.activation_checkpointing);
  j["data"] = io::absolute_path(f.data);
  j["block-size"] = f.block_size;
  j["val-fraction"] = f.val_fraction;
  // An adapter brings its own settings (its adapter_config.json; the module's hyperparameters
  // record its rank, alpha and dropout): the flags' defaults would misreport them.
  if (!f.adapter.empty()) {
    j["adapter"] = io::absolute_path(f.adapter);
    for (const char* key : {"lora-rank", "lora-alpha", "lora-dropout", "lora-targets"})
      j.erase(key);
  }
  if (!f.merge_to.empty()) j["merge-to"] = io::absolute_path(f.merge_to);
  return j;
}

nlohmann::json gpt_run_hparams(const TrainOptions& o, const GptOptions& g,
                               const train::TrainerOptions& t) {
  nlohmann::json j = language_model_run_hparams(o, t, g.warmup_steps, g.activation_checkpointing);
  j["dropout"] = g.dropout;
  return j;
}

void log_run_hparams(const train::Trainer& trainer, const nlohmann::json& hparams) {
  for (const auto& logger : trainer.options().loggers) logger->log_hyperparams(hparams);
}

}  // namespace mantissa::recipes
