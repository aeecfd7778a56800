#include "mantissa/recipes/trainer_setup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "mantissa/core/closest_names.h"
#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/dist/communicator.h"
#include "mantissa/models/image_classifier.h"
#include "mantissa/models/language_model.h"
#include "mantissa/recipes/finetuning.h"
#include "mantissa/recipes/precision_settings.h"
#include "mantissa/recipes/trainer_flag_checks.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/early_stopping.h"
#include "mantissa/train/lr_monitor.h"
#include "mantissa/train/model_summary.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"
#include "mantissa/train/precisions/fp8_stats_monitor.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"
#include "mantissa/train/progress_bar_callback.h"
#include "mantissa/train/report/logger.h"
#include "mantissa/train/report/metric_text.h"
#include "mantissa/train/report/profiler.h"
#include "mantissa/train/timer.h"

namespace mantissa::recipes {
namespace {

// "epoch 2/3" as the epoch lines say it, or "epoch 2" when the run has no epoch limit (the GPT).
std::string epoch_text(const train::Trainer& trainer, int64_t epoch) {
  const std::optional<int64_t>& max = trainer.options().max_epochs;
  return max && *max > 0 ? fmt::format("epoch {}/{}", epoch, *max) : fmt::format("epoch {}", epoch);
}

// The line that confirms a --resume once fit has restored the checkpoint (before on_fit_start):
// which file, the optimizer steps it holds and where in its epoch it was saved.
class ResumeAnnouncer : public train::Callback {
 public:
  std::string state_key() const override { return "ResumeAnnouncer"; }
  void on_fit_start(train::Trainer& trainer, train::TrainModule&) override {
    const int64_t epoch = trainer.current_epoch() + 1, batches = trainer.batches_in_epoch();
    const int64_t per_epoch = trainer.num_training_batches();
    std::string where;
    if (batches == 0)
      where = fmt::format("at the start of {}", epoch_text(trainer, epoch));
    else if (batches >= per_epoch)
      where = fmt::format("after {}", epoch_text(trainer, epoch));
    else
      where =
          fmt::format("in {} after batch {}/{}", epoch_text(trainer, epoch), batches, per_epoch);
    fmt::print("resuming from checkpoint '{}': step {}, {}\n", trainer.ckpt_path(),
               trainer.global_step(), where);
    std::fflush(stdout);
  }
};

// The metrics a run's module logs during fit, and the module as errors name it.
struct FitMetrics {
  const std::vector<std::string>& names;
  std::string module;
};

// finetune and the GPT train a LanguageModel, the image models an ImageClassifier.
FitMetrics fit_metrics(const TrainOptions& o, std::string_view command) {
  if (command == "finetune") return {models::LanguageModel::fit_metric_names(), "a fine-tune"};
  if (o.model == "gpt") return {models::LanguageModel::fit_metric_names(), "the gpt"};
  return {models::ImageClassifier::fit_metric_names(), "the " + o.model};
}

}  // namespace

train::BatchLimit parse_batch_limit(const std::string& s, const char* flag, const char* where) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  // Decimal only: stod also reads hex ("0x10" was 16 batches), "inf" and "nan".
  MANTISSA_CHECK(used == s.size() && used > 0 && std::isfinite(v) && v >= 0 &&
                     s.find_first_not_of("0123456789.eE+-") == std::string::npos,
                 where, "{} expects a fraction like 0.25 or a batch count like 10, got '{}'", flag,
                 s);
  if (s.find_first_of(".eE") != std::string::npos) {
    MANTISSA_CHECK(v <= 1, where, "{} as a fraction must be at most 1.0, got {}", flag, s);
    return train::BatchLimit::fraction(v);
  }
  return train::BatchLimit::batches(static_cast<int64_t>(v));
}

std::string nothing_trained_reason(const RunLimits& limits, const train::Trainer& trainer,
                                   int64_t batches_per_epoch) {
  if (limits.max_steps == 0) return "--max-steps 0 allows no optimizer step";
  if (batches_per_epoch == 0) {
    return fmt::format("--limit-train-batches {} leaves no training batch",
                       limits.limit_train_batches);
  }
  if (!limits.resume.empty() && limits.max_steps > 0 && trainer.global_step() >= limits.max_steps) {
    return fmt::format("the checkpoint '{}' is already at step {} and --max-steps is {}",
                       limits.resume, trainer.global_step(), limits.max_steps);
  }
  if (!limits.resume.empty() && limits.max_epochs >= 0) {
    const bool epoch_done = trainer.batches_in_epoch() >= batches_per_epoch;
    const int64_t epochs = trainer.current_epoch() + (epoch_done ? 1 : 0);
    return fmt::format(
        "the checkpoint '{}' has already trained {} epoch{} and --epochs is {}; raise --epochs to "
        "train on",
        limits.resume, epochs, epochs == 1 ? "" : "s", limits.max_epochs);
  }
  return "no optimizer step ran";
}

train::TrainerOptions make_trainer_options(const TrainOptions& o, const char* command) {
  check_trainer_flags(o, command);  // in the flags' names, before the library's own checks
  train::TrainerOptions t;
  // nf4/fp4/int8 modes: the bitsandbytes plugin object (with the --quant-* options).
  t.plugin = make_quant_plugin(o.precision, o.quant);
  if (!t.plugin) t.precision = train::normalize_precision(o.precision);  // warns for aliases
  t.accelerator = o.accelerator;
  // The name the user gave (t.precision stays at its default with a quantization plugin).
  t.precision_options = settings_for(t.plugin ? o.precision : t.precision, o.precision_options,
                                     /*strict=*/true);
  t.amp_backend = o.amp_backend;
  t.amp_level = o.amp_level;
  if (!o.amp_loss_scale.empty()) {
    MANTISSA_CHECK(o.amp_backend == "apex", command,
                   "--amp-loss-scale applies to --amp-backend apex (the native 16-mixed scaler is "
                   "always dynamic)");
    t.precision_options["loss_scale"] = o.amp_loss_scale;
  }
  // Checked here, in the flags' names (the Trainer's own errors name its fields).
  for (const auto& [flag, value, what] :
       {std::tuple{"--min-epochs", o.min_epochs, "epochs"},
        std::tuple{"--min-steps", o.min_steps, "optimizer steps"}}) {
    MANTISSA_CHECK(value >= 0, command, "{} must be 0 (no minimum) or a number of {}, got {}", flag,
                   what, value);
  }
  t.min_epochs = o.min_epochs;
  t.min_steps = o.min_steps;
  if (!o.max_time.empty()) t.max_time = train::parse_max_time(o.max_time, "--max-time");
  t.accumulate_grad_batches = o.accumulate_grad_batches;
  t.gradient_clip_val = o.gradient_clip_val;
  t.gradient_clip_algorithm = o.gradient_clip_algorithm;
  t.limit_train_batches =
      parse_batch_limit(o.limit_train_batches, "--limit-train-batches", command);
  t.val_check_interval = parse_batch_limit(o.val_check_interval, "--val-check-interval", command);
  // Not given: the Trainer's default (every batch); the GPT's run sets its own (gpt_run.cpp).
  if (!o.limit_val_batches.empty())
    t.limit_val_batches = parse_batch_limit(o.limit_val_batches, "--limit-val-batches", command);
  if (!o.limit_test_batches.empty())
    t.limit_test_batches = parse_batch_limit(o.limit_test_batches, "--limit-test-batches", command);
  // No validation batch turns validation off (the Trainer; not under --overfit-batches or
  // --fast-dev-run, which validate their own batches): a callback monitoring a validation
  // metric would wait for a value never logged. Lightning's EarlyStopping fails at its first
  // check (at the first epoch's end), its ModelCheckpoint warns and keeps no ranked
  // checkpoint; here the run is refused before it trains.
  if (!o.limit_val_batches.empty() && o.overfit_batches.empty() && o.fast_dev_run == 0 &&
      t.limit_val_batches.value() == 0) {
    for (const auto& [flag, metric] :
         {std::pair{"--early-stopping-monitor", &o.early_stopping_monitor},
          std::pair{"--checkpoint-monitor", &o.checkpoint_monitor}}) {
      MANTISSA_CHECK(!metric->starts_with("val_"), command,
                     "{} {} is a validation metric, but --limit-val-batches {} turns validation "
                     "off, so it is never logged (Lightning's EarlyStopping fails on it at its "
                     "first check); monitor a training metric such as train_loss, or validate "
                     "some batches",
                     flag, *metric, o.limit_val_batches);
    }
  }
  // The run's module logs a fixed set of metrics during fit: a monitor naming another (a typo
  // such as val_los, or test_loss, logged only after training) was found missing at the first
  // check, after an epoch of training, with no checkpoint written.
  const FitMetrics logged = fit_metrics(o, command);
  for (const auto& [flag, metric] :
       {std::pair{"--early-stopping-monitor", &o.early_stopping_monitor},
        std::pair{"--checkpoint-monitor", &o.checkpoint_monitor}}) {
    if (metric->empty() ||
        std::find(logged.names.begin(), logged.names.end(), *metric) != logged.names.end())
      continue;
    const std::string meant = likely_meant(*metric, logged.names);
    fail(command, "{} {} is not a metric {} logs while it trains{}; it logs {}", flag,
         quote_untrusted(*metric, 64), logged.module,
         meant.empty() ? std::string() : fmt::format(" (did you mean {}?)", meant),
         fmt::join(logged.names, ", "));
  }
  // 0 would validate after every batch (the interval is at least one batch): never what is meant.
  MANTISSA_CHECK(t.val_check_interval.resolve_interval(1 << 20) > 0, command,
                 "--val-check-interval must be a fraction of an epoch in (0, 1] or a batch count "
                 ">= 1, got '{}' (fewer validations: a larger interval; none: "
                 "--limit-val-batches 0)",
                 o.val_check_interval);
  t.enable_progress_bar = o.progress_bar && !o.quiet;
  t.enable_checkpointing = !o.checkpoint_dir.empty();
  t.seed = o.seed;
  t.log_every_n_steps = o.log_every_n_steps;
  MANTISSA_CHECK(o.fp8_stats_every >= 0, command,
                 "--fp8-stats-every must be at least 1 optimizer step, or 0 to follow "
                 "--log-every-n-steps; got {}",
                 o.fp8_stats_every);
  MANTISSA_CHECK(o.fp8_stats_every == 0 || (!t.plugin && train::precision_traits(t.precision).fp8),
                 "precision",
                 "--fp8-stats-every applies to the transformer-engine precisions only, not '{}'",
                 o.precision);
  t.profiler = train::make_profiler(o.profiler);  // checks the name
  t.fast_dev_run = o.fast_dev_run;
  t.check_val_every_n_epoch = o.check_val_every_n_epoch;
  t.num_sanity_val_steps = o.num_sanity_val_steps;
  t.detect_anomaly = o.detect_anomaly;
  t.cuda_graphs = o.cuda_graphs && o.model == "gpt";  // the others ignore it (ignored_flags)
  if (!o.overfit_batches.empty()) {
    t.overfit_batches = parse_batch_limit(o.overfit_batches, "--overfit-batches", command);
  }
  t.callbacks = o.callbacks;
  // First, so the confirmation precedes what the other callbacks print at the fit's start.
  if (!o.resume.empty() && !o.quiet)
    t.callbacks.insert(t.callbacks.begin(), std::make_shared<ResumeAnnouncer>());
  if (o.checkpoint_dir.empty()) {
    for (const auto& [flag, given] :
         {std::pair{"--checkpoint-monitor", !o.checkpoint_monitor.empty()},
          std::pair{"--every-n-train-steps", o.every_n_train_steps != 0}}) {
      MANTISSA_CHECK(!given, command,
                     "{} needs --checkpoint-dir (the directory its checkpoints go to)", flag);
    }
  }
  if (!o.checkpoint_dir.empty()) {
    train::ModelCheckpointOptions mc;
    mc.dirpath = o.checkpoint_dir;
    mc.save_top_k = o.save_top_k;  // default -1: one file per epoch
    mc.save_last = true;
    mc.every_n_train_steps = o.every_n_train_steps;
    if (!o.checkpoint_monitor.empty()) {
      mc.monitor = o.checkpoint_monitor;
      mc.mode = o.checkpoint_mode;
      mc.filename = "{epoch}-{step}-{" + o.checkpoint_monitor + "}";
    }
    t.callbacks.push_back(std::make_shared<train::ModelCheckpoint>(mc));
  }
  if (!o.early_stopping_monitor.empty()) {
    train::EarlyStoppingOptions es;
    es.monitor = o.early_stopping_monitor;
    es.mode = o.early_stopping_mode;
    es.patience = o.early_stopping_patience;
    es.min_delta = o.early_stopping_min_delta;
    // check_on_train_epoch_end left unset: the callback decides at setup, from the Trainer's
    // final val_check_interval (the GPT and finetune set theirs from --eval-interval after
    // this), as Lightning's EarlyStopping does.
    es.verbose = !o.quiet;
    t.callbacks.push_back(std::make_shared<train::EarlyStopping>(es));
  }
  if (!o.quiet && o.model_summary)
    t.callbacks.push_back(std::make_shared<train::ModelSummary>(/*max_depth=*/2));
  MANTISSA_CHECK(o.logger.empty() || o.logger == "csv" || o.logger == "tensorboard", command,
                 "unknown --logger '{}'; valid values are: csv, tensorboard", o.logger);
  // A logger makes its version_N directory when it is made: on rank 0 alone, or another rank
  // could take version_0 first and rank 0's metrics land in version_1 beside an empty one.
  if (!is_other_rank()) {
    if (o.logger == "csv") t.loggers.push_back(std::make_shared<train::CSVLogger>(".", o.log_dir));
    if (o.logger == "tensorboard")
      t.loggers.push_back(std::make_shared<train::TensorBoardLogger>(".", o.log_dir));
  }
  apply_distributed_options(o, t);
  if (!t.loggers.empty()) t.callbacks.push_back(std::make_shared<train::LearningRateMonitor>());
  // Always under FP8 (not only with a logger): the metrics JSON reports its last interval.
  if (!t.plugin && train::precision_traits(t.precision).fp8)
    t.callbacks.push_back(std::make_shared<train::Fp8StatsMonitor>(o.fp8_stats_every));
  if (t.enable_progress_bar) t.callbacks.push_back(std::make_shared<train::ProgressBarCallback>());
  return t;
}

FinalEvaluation final_evaluation(train::Trainer& trainer, const data::DataLoader& loader,
                                 bool validated_at_last_step) {
  const train::TrainerOptions& t = trainer.options();
  // As the Trainer resolves them: against the job's batches (under ddp the longest shard's,
  // each rank running its shard's batches of those).
  train::Strategy& strategy = trainer.strategy();
  const int64_t batches = strategy.max_over_ranks(strategy.evaluation_loader(loader).size());
  const int64_t test = t.limit_test_batches.resolve(batches, "--limit-test-batches", "test");
  if (test == 0) return FinalEvaluation::kNone;
  // Trainer::validate's
  const int64_t validate = t.limit_val_batches.resolve(batches, "--limit-val-batches", "val");
  if (test != validate) return FinalEvaluation::kTest;
  // (Under --overfit-batches the fit's validations read the overfit batches: the last one's
  // numbers stay the final ones, as before the limits.)
  return validated_at_last_step ? FinalEvaluation::kLastValidation : FinalEvaluation::kValidate;
}

void check_batch_limits(train::Trainer& trainer, const data::DataLoader& train_loader,
                        const data::DataLoader* eval_loader) {
  const train::TrainerOptions& t = trainer.options();
  train::Strategy& strategy = trainer.strategy();
  if (t.overfit_batches) {
    t.overfit_batches->resolve(batches_per_rank(trainer, train_loader), "--overfit-batches",
                               "train");
  } else {
    t.limit_train_batches.resolve(batches_per_rank(trainer, train_loader), "--limit-train-batches",
                                  "train");
  }
  if (eval_loader == nullptr) return;
  // The evaluation limits count the job's batches, as the Trainer counts them.
  const int64_t batches = strategy.max_over_ranks(strategy.evaluation_loader(*eval_loader).size());
  t.limit_val_batches.resolve(batches, "--limit-val-batches", "val");
  t.limit_test_batches.resolve(batches, "--limit-test-batches", "test");
}

EvalBatchLimit eval_batch_limit(const TrainOptions& o) {
  EvalBatchLimit out;
  const bool test = !o.limit_test_batches.empty();
  const bool val = !o.limit_val_batches.empty();
  if (!test && !val) return out;  // every batch
  out.flag = test ? "--limit-test-batches" : "--limit-val-batches";
  out.limit =
      parse_batch_limit(test ? o.limit_test_batches : o.limit_val_batches, out.flag.c_str());
  if (test && val) {
    const train::BatchLimit other = parse_batch_limit(o.limit_val_batches, "--limit-val-batches");
    MANTISSA_CHECK(
        other.is_fraction() == out.limit.is_fraction() && other.value() == out.limit.value(),
        "eval",
        "--limit-test-batches {} and --limit-val-batches {} disagree: eval runs one "
        "evaluation (a train run's final one, which --limit-test-batches sets); give "
        "one of them",
        o.limit_test_batches, o.limit_val_batches);
  }
  MANTISSA_CHECK(out.limit.value() > 0, "eval",
                 "{} {} leaves nothing to evaluate; give a batch count such as 10 or a fraction "
                 "such as 0.25 (leave it out for every batch)",
                 out.flag, test ? o.limit_test_batches : o.limit_val_batches);
  return out;
}

void check_eval_batch_limit(train::Trainer& trainer, const data::DataLoader& loader,
                            const EvalBatchLimit& limit, const char* what) {
  if (limit.flag.empty()) return;
  train::Strategy& strategy = trainer.strategy();
  limit.limit.resolve(strategy.max_over_ranks(strategy.evaluation_loader(loader).size()),
                      limit.flag, what);
}

std::string workers_text(const train::Trainer& trainer, int threads) {
  const std::string per = fmt::format("{} thread{}", threads, threads == 1 ? "" : "s");
  const int ranks = trainer.strategy().world_size();
  return ranks > 1 ? fmt::format("{} processes x {} ({})", ranks, per, trainer.strategy().name())
                   : per;
}

std::optional<nlohmann::json> fp8_metrics(const train::Trainer& trainer) {
  for (const auto& cb : trainer.callbacks()) {
    if (auto* monitor = dynamic_cast<const train::Fp8StatsMonitor*>(cb.get()))
      return monitor->last_json();
  }
  return std::nullopt;
}

std::optional<nlohmann::json> fp8_recipe_metrics(const train::Precision& precision) {
  const auto* te = dynamic_cast<const train::TransformerEnginePrecision*>(&precision);
  if (te == nullptr) return std::nullopt;
  nlohmann::json j = te->recipe().to_json();
  j["exclude"] = te->exclude();
  return j;
}

int64_t batches_per_rank(train::Trainer& trainer, const data::DataLoader& loader) {
  return trainer.strategy().training_loader(loader).size();
}

bool is_other_rank() {
  return dist::launched_by_mpi() && dist::launcher_world_size() > 1 && dist::world()->rank() != 0;
}

void apply_distributed_options(const TrainOptions& o, train::TrainerOptions& t) {
  t.strategy = o.strategy;
  t.devices = o.devices;
  t.sync_batchnorm = o.sync_batchnorm;
  t.ddp.reduce_dtype =
      o.ddp_bf16_compress || o.grad_reduce_dtype == "bfloat16" ? kBFloat16 : kFloat32;
  t.ddp.fsdp_param_dtype = o.fsdp_param_dtype == "bfloat16"  ? kBFloat16
                           : o.fsdp_param_dtype == "float16" ? kFloat16
                                                             : kFloat32;
  t.ddp.fsdp_prefetch = !o.no_fsdp_prefetch;
  t.ddp.bucket_cap_bytes = static_cast<int64_t>(o.ddp_bucket_cap_mb * 1024 * 1024);
  t.collective_timeout_s = o.collective_timeout;
  t.sharded_checkpoints = o.sharded_checkpoint;
  if (is_other_rank()) {
    // Rank 0 alone draws, logs and checkpoints (the Trainer also drops the loggers there).
    t.enable_progress_bar = false;
    t.loggers.clear();
  }
}

std::string non_finite_eval_message(const std::string& checkpoint, const char* what, double loss,
                                    const std::string& precision) {
  return fmt::format(
      "{}: the {} loss is {}: these weights give non-finite outputs in {} (the file is damaged, "
      "or its values overflow in this precision); evaluate it in the precision it was trained "
      "in, or evaluate an earlier checkpoint",
      checkpoint, what, train::metric_text(loss), precision);
}

bool computes_in_bf16(train::Trainer& trainer) {
  const train::Precision& p = trainer.precision_plugin();
  // bf16-mixed's parameters are float32; its autocast computes in bfloat16.
  const train::PrecisionEntry* entry = train::find_precision(p.precision());
  if (p.param_dtype() == kBFloat16 ||
      (entry != nullptr && entry->math == train::PrecisionMath::kBFloat16))
    return true;
  const auto* quantized = dynamic_cast<const train::BitsandbytesPrecision*>(&p);
  return quantized != nullptr && quantized->dtype() == kBFloat16;
}

}  // namespace mantissa::recipes
