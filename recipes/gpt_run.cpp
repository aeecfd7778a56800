#include "mantissa/recipes/gpt_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <optional>

#include "mantissa/core/allocator.h"
#include "mantissa/core/terminal.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/core/warning.h"
#include "mantissa/data/text_corpus.h"
#include "mantissa/data/text_window_dataset.h"
#include "mantissa/io/json_dump.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/mantissa.h"
#include "mantissa/models/gpt.h"
#include "mantissa/models/language_model.h"
#include "mantissa/ops/matmul_precision.h"
#include "mantissa/optim/grad_scaler.h"
#include "mantissa/optim/optimizer_factory.h"
#include "mantissa/recipes/byte_size.h"
#include "mantissa/recipes/diverged_result.h"
#include "mantissa/recipes/earlier_run_outputs.h"
#include "mantissa/recipes/finetuning.h"
#include "mantissa/recipes/init_from_check.h"
#include "mantissa/recipes/language_model_fit.h"
#include "mantissa/recipes/lr_find_run.h"
#include "mantissa/recipes/model_footprint.h"
#include "mantissa/recipes/model_hparams.h"
#include "mantissa/recipes/precision_settings.h"
#include "mantissa/recipes/run_hparams.h"
#include "mantissa/recipes/thread_count.h"
#include "mantissa/recipes/trainer_flag_checks.h"
#include "mantissa/recipes/trainer_setup.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"
#include "mantissa/train/report/metric_text.h"
#include "mantissa/train/signals.h"
#include "mantissa/train/trainer.h"

namespace mantissa::recipes {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The step and epoch limits of a run (see GptOptions::max_steps).
struct RunLength {
  int64_t max_steps;   // -1: none
  int64_t max_epochs;  // -1: none
};

RunLength run_length(const GptOptions& g) {
  if (g.epochs) {
    MANTISSA_CHECK(*g.epochs >= 1, "train", "--epochs must be at least 1, got {}", *g.epochs);
  }
  if (g.max_steps) {
    MANTISSA_CHECK(*g.max_steps >= 1 || *g.max_steps == -1, "train",
                   "--max-steps must be at least 1 for --model gpt, got {} (or -1 for no step "
                   "limit together with --epochs)",
                   *g.max_steps);
    MANTISSA_CHECK(*g.max_steps != -1 || g.epochs.has_value(), "train",
                   "--max-steps -1 (no step limit) needs --epochs for --model gpt; otherwise "
                   "the run would not end");
  }
  const int64_t steps = g.max_steps.value_or(g.epochs ? int64_t{-1} : GptOptions::kDefaultMaxSteps);
  return {steps, g.epochs.value_or(-1)};
}

void validate(const TrainOptions& o, const GptOptions& g) {
  // The image models' fields (hidden, vit_patch, vit_pool, train_subset, data_dir,
  // lr_schedule) are not read: `mantissa train` warns about them when given (apps/ignored_flags.h).
  MANTISSA_CHECK(o.batch_size >= 1, "train", "--batch-size must be at least 1, got {}",
                 o.batch_size);
  MANTISSA_CHECK(std::isfinite(o.lr) && o.lr > 0, "train", "--lr must be positive, got {}", o.lr);
  // Checked here, before the data and model load (the optimizer refused it only then, as
  // "[AdamW] Invalid weight_decay value", naming no flag).
  MANTISSA_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "train",
                 "--weight-decay must be a finite number >= 0, got {}", o.weight_decay);
  MANTISSA_CHECK(g.context >= 1, "train", "--context must be at least 1, got {}", g.context);
  MANTISSA_CHECK(g.layers >= 1, "train", "--layers must be at least 1, got {}", g.layers);
  MANTISSA_CHECK(g.eval_batches >= 1, "train", "eval batches must be at least 1, got {}",
                 g.eval_batches);
  MANTISSA_CHECK(g.warmup_steps >= 0, "train", "--warmup-steps must not be negative, got {}",
                 g.warmup_steps);
  MANTISSA_CHECK(g.sample_tokens >= 0, "train", "--sample-tokens must not be negative, got {}",
                 g.sample_tokens);
  MANTISSA_CHECK(g.sample_tokens <= GptOptions::kMaxSampleTokens, "train",
                 "--sample-tokens must be at most {} (the sample is printed at the end of the "
                 "run, and each byte is a forward pass of the model), got {}",
                 GptOptions::kMaxSampleTokens, g.sample_tokens);
  check_eval_interval(g.eval_interval, o, "train");
  // An error, not an ignored flag's warning: these ask for how the half-precision weights are
  // updated, and the GPT's optimizer has neither, so ignoring them would train the weights
  // differently from what was asked (no fp32 master copy, round-to-nearest updates).
  MANTISSA_CHECK(!o.master_weights && !o.stochastic_rounding, "train",
                 "--master-weights and --stochastic-rounding are not supported for --model gpt");
  optim::check_optimizer_name(o.optimizer);
  validate_quant_options(o.quant);
  // Refused here rather than at the first forward (fp8_linear): the data and model load first.
  if (g.activation_checkpointing)
    check_activation_checkpointing({o.precision}, o.precision_options, "train");
}

// The optimizer steps the schedule decays over: the step limit, or the epochs' steps (the
// training batches of an epoch after --limit-train-batches, over --accumulate-grad-batches).
int64_t schedule_steps(const RunLength& len, const train::TrainerOptions& t,
                       int64_t loader_batches) {
  const int64_t batches =
      t.limit_train_batches.resolve(loader_batches, "--limit-train-batches", "train");
  const int64_t per_epoch = (batches + t.accumulate_grad_batches - 1) / t.accumulate_grad_batches;
  const int64_t by_epochs = len.max_epochs > 0 ? per_epoch * len.max_epochs : -1;
  if (len.max_steps > 0 && by_epochs > 0) return std::min(len.max_steps, by_epochs);
  return len.max_steps > 0 ? len.max_steps : std::max<int64_t>(by_epochs, 1);
}

// The GPT of a run in the plugin's dtype. Built inside the plugin's init scope (the
// bitsandbytes plugin quantizes each block as soon as the next one is built), unless
// --init-from brings full-precision weights to load first; then --init-from, quantization and
// LoRA adapters (the other plugins convert the model, e.g. to FP8 layers, at the Trainer's
// setup). The parameter counts go to m.
std::shared_ptr<models::GPT> build_gpt(const TrainOptions& o, const GptOptions& g,
                                       train::Precision& precision, bool host_memory,
                                       TrainMetrics& m) {
  // Its recorded sizes, before anything is built: a file of another --heads would load.
  check_init_from(o, g);
  check_resume(o, g);
  // A size no machine holds (--layers 100000000) is refused with the figures before anything is
  // allocated.
  const bool training = o.evaluate_checkpoint.empty();
  const ParameterBits bits =
      per_rank_bits(parameter_bits(precision.precision(), precision.param_dtype(), o.optimizer,
                                   /*fp32_state=*/false, training && o.quant.lora_rank == 0),
                    o.strategy);
  const ModelFootprint footprint{
      .parameters = gpt_parameter_count(gpt_config(g, precision.param_dtype())),
      .bits = bits,
      .precision = precision.precision(),
      .optimizer = o.optimizer};
  check_model_fits(footprint, memory_bound(o.memory_limit, host_memory),
                   fmt::format("--model gpt (--layers {} --width {} --context {})", g.layers,
                               g.width, g.context));
  announce_large_build(footprint, training ? "train" : "eval", o.quiet);
  // Nothing is trained yet: a Ctrl-C while the model is built ends the run at once.
  const train::ExitOnInterrupt building("building the model");
  std::shared_ptr<models::GPT> gpt;
  {
    train::ScopePtr scope =
        build_in_init_scope(o.quant) ? precision.module_init_context() : nullptr;
    gpt = std::make_shared<models::GPT>(gpt_config(g, precision.param_dtype()));
  }
  prepare_model_for_finetuning(*gpt, &precision, o.quant, m, training);
  // Not for plan's dry runs (evaluate off), which measure memory only.
  if (training && o.evaluate) {
    warn_if_adapting_random_weights(o.precision, o.quant, !o.resume.empty(), "GPT");
  }
  return gpt;
}

// The windows of one part of the corpus. TextWindowDataset's own error speaks of "the text",
// which here is a part of the user's --text: a 100-byte file with --context 64 said "the text
// has 10 bytes", not that it is the validation part (the last 10 %) and how long the file must
// be. The check is made here, where the file and the flag are known.
std::shared_ptr<data::TextWindowDataset> corpus_windows(const data::TextCorpus& corpus, bool train,
                                                        int64_t context) {
  const std::string& part = train ? corpus.train_text() : corpus.val_text();
  const auto n = static_cast<int64_t>(part.size());
  if (n >= context + 1) return std::make_shared<data::TextWindowDataset>(part, context);
  // The smallest text whose two parts (split as TextCorpus splits it, at its default fraction:
  // the GPT's corpus is built with it) both hold a window.
  constexpr double kVal = data::TextCorpus::kDefaultValFraction;
  // From the closed form, then the few steps that rounding leaves (a loop from context + 1 took
  // seconds for --context 2147483647).
  const auto val_bytes = [&](int64_t total) {
    return static_cast<int64_t>(static_cast<double>(total) * kVal);
  };
  auto needed = static_cast<int64_t>(std::ceil(static_cast<double>(context + 1) / kVal));
  while (needed > context + 1 && val_bytes(needed - 1) >= context + 1) --needed;
  while (val_bytes(needed) < context + 1) ++needed;
  const size_t total = corpus.train_text().size() + corpus.val_text().size();
  fail("TextCorpus",
       "--text '{}' holds {} bytes; its {} part ({}) has {}, fewer than one window of "
       "--context + 1 = {} bytes; use a text of at least {} bytes or a shorter --context",
       corpus.path(), total, train ? "training" : "validation",
       fmt::format("the {} {:g} %", train ? "first" : "last", 100 * (train ? 1 - kVal : kVal)), n,
       context + 1, needed);
}

}  // namespace

models::GPTConfig gpt_config(const GptOptions& g, DType dtype) {
  return models::GPTConfig{.context = g.context,
                           .layers = g.layers,
                           .width = g.width,
                           .heads = g.heads,
                           .dropout = g.dropout,
                           .tie_embeddings = g.tie_embeddings,
                           .dtype = dtype,
                           .activation_checkpointing = g.activation_checkpointing};
}

TrainMetrics run_gpt_training(const TrainOptions& o, const GptOptions& g) {
  // From the start: a Ctrl-C during set-up still stops the run at its first check.
  train::InterruptHandlers interrupt_handlers;
  validate(o, g);
  refuse_earlier_training_outputs(o);
  Float32MatmulPrecisionGuard matmul_precision(float32_matmul_precision());
  set_float32_matmul_precision(o.float32_matmul_precision);
  const RunLength len = run_length(g);
  train::TrainerOptions topts = make_trainer_options(o);
  topts.max_steps = len.max_steps;
  topts.max_epochs = len.max_epochs;
  topts.gradient_clip_val = g.gradient_clip_val.value_or(1.0);
  // Not given, each validation and the final evaluation read eval_batches batches (16): the
  // validation text is often larger than a run's training needs to be checked against.
  if (o.limit_val_batches.empty())
    topts.limit_val_batches = train::BatchLimit::batches(g.eval_batches);
  if (o.limit_test_batches.empty())
    topts.limit_test_batches = train::BatchLimit::batches(g.eval_batches);
  const bool val_interval_given = o.val_check_interval != TrainOptions{}.val_check_interval;
  if (!val_interval_given) {
    // --eval-interval counts optimizer steps; the Trainer counts training batches.
    topts.val_check_interval = train::BatchLimit::batches(
        g.eval_interval.value_or(GptOptions::kDefaultEvalInterval) * o.accumulate_grad_batches);
  }

  // The corpus and its windows: training windows shuffled per epoch (seed + 1 + epoch), the
  // validation windows in order (the first eval_batches batches of them).
  std::optional<train::ExitOnInterrupt> loading(std::in_place, "reading the text");
  const data::TextCorpus corpus(g.text);
  loading.reset();
  auto train_set = corpus_windows(corpus, /*train=*/true, g.context);
  auto val_set = corpus_windows(corpus, /*train=*/false, g.context);
  data::DataLoader train_loader(train_set, o.batch_size, /*shuffle=*/true, o.seed + 1);
  std::shared_ptr<ValidationPrinter> printer;
  if (!o.quiet) {
    printer = std::make_shared<ValidationPrinter>("nats/byte", stdout_is_terminal());
    add_validation_printer(topts, printer);
  }

  const std::shared_ptr<train::LearningRateFinder> lr_finder = setup_lr_find(o, topts);
  auto fit_start = std::make_shared<FitStartStep>();
  topts.callbacks.push_back(fit_start);
  train::Trainer trainer(topts);  // seeds the default generator (initialisation)
  log_run_hparams(trainer, gpt_run_hparams(o, g, trainer.options()));
  // An epoch is this rank's shard under ddp: its batches set the schedule's length.
  const int64_t rank_batches = batches_per_rank(trainer, train_loader);
  const int64_t total_steps = schedule_steps(len, topts, rank_batches);
  if (printer) {
    printer->set_total_steps(lr_finder           ? o.lr_find_steps
                             : len.max_steps > 0 ? len.max_steps
                                                 : total_steps);
  }
  // Validation is sharded (docs/distributed.md): with the per-rank batch, the ranks' first
  // eval_batches batches together are the first eval_batches batches of the global batch
  // (--batch-size x ranks), the windows one process with that batch validates, and the
  // module adds up their losses over the ranks.
  data::DataLoader val_loader(val_set, o.batch_size);
  check_batch_limits(trainer, train_loader, &val_loader);  // before the model trains
  train::Precision& precision = trainer.precision_plugin();
  const std::string name = precision.precision();
  apply_thread_count(o.threads);
  if (computes_in_bf16(trainer)) warn_once_if_bf16_emulated();

  reset_peak_memory_stats();
  const int64_t baseline_bytes = memory_allocated();
  std::optional<MemoryLimitGuard> budget;  // --memory-limit: the corpus is not counted
  if (!o.memory_limit.empty()) {
    budget.emplace(MemoryLimit{.bytes = parse_byte_size(o.memory_limit, "--memory-limit"),
                               .exempt_bytes = baseline_bytes});
  }
  TrainMetrics m;
  const std::shared_ptr<models::GPT> gpt = build_gpt(o, g, precision, trainer.device().is_cpu(), m);
  // As in image_run.cpp: the build's transient (--init-from) is the run's peak, not training's.
  const int64_t build_peak_bytes = max_memory_allocated();
  reset_peak_memory_stats();

  const optim::OptimizerChoice choice = language_model_optimizer_choice(o, precision, true);
  models::LanguageModel lm(gpt, {.lr = o.lr,
                                 .weight_decay = o.weight_decay,
                                 .warmup_steps = g.warmup_steps,
                                 .total_steps = total_steps,
                                 .make_optimizer = [choice](nn::Module& model) {
                                   return optim::make_optimizer(choice, model);
                                 }});
  lm.save_hyperparameters(gpt_model_hparams(o, g));

  m.precision = name;
  m.model = "gpt";
  m.activation_checkpointing = g.activation_checkpointing;
  m.epochs = static_cast<int>(len.max_epochs > 0 ? len.max_epochs : -1);  // -1: steps alone
  m.batch_size = o.batch_size;
  m.threads = omp_get_max_threads();
  m.seed = o.seed;
  m.parameters = m.total_parameters.value_or(gpt->parameter_count());
  if (!o.quiet) {
    fmt::print(
        "mantissa train: model gpt ({} layers, width {}, {} heads, context {}, {} parameters{}), "
        "precision {}, optimizer {}, {}\ncorpus {} ({} files): {} training / {} validation bytes, "
        "{} training windows of {} bytes ({} batches per epoch)\n",
        g.layers, g.width, g.heads, g.context, m.parameters,
        g.activation_checkpointing ? ", activation checkpointing" : "", name, choice.name,
        workers_text(trainer, m.threads), corpus.path(), corpus.files().size(),
        corpus.train_text().size(), corpus.val_text().size(), train_set->size(), g.context + 1,
        rank_batches);
    if (!o.quant.init_from.empty()) fmt::print("{}\n", init_from_banner(o.quant.init_from));
    std::fflush(stdout);
  }

  const auto run_start = Clock::now();
  const FitOutcome fit =
      fit_language_model(trainer, lm, train_loader, val_loader, o, topts, *fit_start,
                         {.max_steps = len.max_steps,
                          .max_epochs = len.max_epochs,
                          .rank_batches = rank_batches,
                          .lr_find = lr_finder != nullptr,
                          .baseline_bytes = baseline_bytes,
                          .build_peak_bytes = build_peak_bytes},
                         m);
  const bool stopped = fit.stopped();
  // fsdp: the sample and the saved weights read the whole model (gathered on every rank, next
  // to its part of the optimizer state); a run with neither keeps it sharded to its end.
  if ((g.sample_tokens > 0 || !g.save_weights.empty()) && !stopped && !lr_finder)
    trainer.strategy().unshard_module(lm);
  // A signal during the sample (after training and the final evaluation) ends it at the next
  // byte: the bytes generated are kept, and the run is reported as interrupted (a sample that
  // never looked at the signal would run until killed).
  std::optional<int> sample_interrupt;
  if (g.sample_tokens > 0 && !trainer.interrupted() && !stopped && !lr_finder) {
    Generator sample_gen(o.seed + 3);
    m.sample = lm.gpt().sample(g.sample_prompt, g.sample_tokens, g.temperature, g.top_k,
                               &sample_gen, [] { return train::pending_interrupt().has_value(); });
    sample_interrupt = train::pending_interrupt();
    // sample() returns the prompt and the bytes after it (an empty prompt is left out).
    const int64_t generated =
        static_cast<int64_t>(m.sample->size()) - static_cast<int64_t>(g.sample_prompt.size());
    if (sample_interrupt) m.sample_interrupted_after_bytes = generated;
    if (!o.quiet) {
      // A byte-level model samples bytes: a short run's are often not valid UTF-8 or are
      // control characters, which the terminal would act on. Each line is escaped (\xNN).
      std::string shown;
      size_t start = 0;
      while (start <= m.sample->size()) {
        const size_t end = std::min(m.sample->find('\n', start), m.sample->size());
        shown += escape_untrusted(std::string_view(*m.sample).substr(start, end - start),
                                  m.sample->size() + 1);
        if (end < m.sample->size()) shown += '\n';
        start = end + 1;
      }
      const std::string cut = sample_interrupt ? fmt::format("; interrupted after {} of {} bytes",
                                                             generated, g.sample_tokens)
                                               : "";
      fmt::print("sample (temperature {}, top-k {}{}):\n{}\n", g.temperature, g.top_k, cut, shown);
    }
  }
  // Non-finite weights are no model to save (an eval or --init-from of them would fail).
  if (!g.save_weights.empty() && !stopped && !lr_finder && trainer.strategy().is_global_zero()) {
    io::NamedTensors tensors;
    for (const auto& [key, t] : lm.gpt().state_dict()) tensors.emplace_back("model." + key, t);
    io::save_safetensors(
        g.save_weights, tensors,
        {{"precision", name}, {"model", "gpt"}, {"hyper_parameters", io::dump_json(lm.hparams())}});
    if (!o.quiet) fmt::print("model weights written to {}\n", g.save_weights);
  }
  m.total_seconds = seconds_since(run_start);
  record_fit_end(trainer, lm.net(), o.optimizer, {"validation", m.val_loss_nats_per_char}, m);
  if (sample_interrupt) record_interruption(trainer, m, *sample_interrupt);
  if (lr_finder) {
    report_lr_find(*lr_finder, o, fmt::format("gpt {}x{}, precision {}", g.layers, g.width, name),
                   trainer.strategy().is_global_zero(), m);
  }
  finish_fit(trainer, fit, m, o.metrics_json);
  if (sample_interrupt) {
    // Training had finished: nothing to resume; say where the trained weights are.
    std::vector<std::string> kept;
    if (!m.resume_checkpoint->empty()) kept.push_back(*m.resume_checkpoint);
    if (!g.save_weights.empty()) kept.push_back(g.save_weights);
    const std::string weights =
        kept.empty() ? std::string(
                           "the trained weights were not saved (pass --checkpoint-dir or "
                           "--save-weights to keep them)")
                     : fmt::format("the trained weights are in {}", fmt::join(kept, " and "));
    throw TrainingInterrupted(
        fmt::format("interrupted by {} while generating the sample, after {} of {} bytes; "
                    "training had finished at step {}; {}",
                    *m.interrupted_by, *m.sample_interrupted_after_bytes, g.sample_tokens,
                    *m.interrupted_after_step, weights),
        128 + *sample_interrupt, *m.interrupted_after_step);
  }
  return m;
}

TrainMetrics run_gpt_evaluation(const TrainOptions& o, const GptOptions& g) {
  MANTISSA_CHECK(!o.evaluate_checkpoint.empty(), "eval", "no checkpoint to evaluate");
  MANTISSA_CHECK(o.batch_size >= 1, "eval", "--batch-size must be at least 1, got {}",
                 o.batch_size);
  if (!o.metrics_json.empty()) io::check_output_file(o.metrics_json, "--metrics-json");
  train::TrainerOptions topts = make_trainer_options(o);
  topts.enable_checkpointing = false;
  // Batches of --batch-size windows of the validation text, as train's final validation loss
  // counts them (not given: the whole text, where train reads 16 batches).
  const EvalBatchLimit limit = eval_batch_limit(o);
  topts.limit_val_batches = limit.limit;
  const data::TextCorpus corpus(g.text);
  auto val_set = corpus_windows(corpus, /*train=*/false, g.context);
  data::DataLoader val_loader(val_set, o.batch_size);
  train::Trainer trainer(topts);
  check_eval_batch_limit(trainer, val_loader, limit, "val");  // before the model is built
  train::Precision& precision = trainer.precision_plugin();
  apply_thread_count(o.threads);
  if (computes_in_bf16(trainer)) warn_once_if_bf16_emulated();
  TrainMetrics m;
  const std::shared_ptr<models::GPT> gpt = build_gpt(o, g, precision, trainer.device().is_cpu(), m);
  models::LanguageModel lm(gpt, {});
  reset_peak_memory_stats();
  const auto start = Clock::now();
  // Weights quantized on load (eval of a full-precision file in nf4, ...) are in place already.
  const auto results =
      trainer.validate(lm, val_loader, o.quant.init_from.empty() ? o.evaluate_checkpoint : "");
  const auto it = results.find("val_loss");
  MANTISSA_CHECK(it != results.end(), "eval", "the validation text of {} has no window of {} bytes",
                 corpus.path(), g.context + 1);
  // A NaN loss is no result to report (not "validation loss nan" and exit status 0).
  MANTISSA_CHECK(std::isfinite(it->second), "eval", "{}",
                 non_finite_eval_message(o.evaluate_checkpoint, "validation", it->second,
                                         precision.precision()));
  m.precision = precision.precision();
  m.fp8_recipe = fp8_recipe_metrics(precision);
  m.model = "gpt";
  m.evaluated_checkpoint = o.evaluate_checkpoint;
  m.batch_size = o.batch_size;
  m.threads = omp_get_max_threads();
  m.parameters = m.total_parameters.value_or(gpt->parameter_count());
  m.val_loss_nats_per_char = it->second;
  m.peak_memory_bytes = max_memory_allocated();
  m.total_seconds = seconds_since(start);
  if (!o.metrics_json.empty()) write_metrics_json(m, o.metrics_json);
  return m;
}

}  // namespace mantissa::recipes
