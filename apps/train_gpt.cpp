#include "train_gpt.h"

#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <numbers>

#include "gpt.h"
#include "mantissa/data/text_corpus.h"
#include "mantissa/mantissa.h"
#include "mantissa/optim/grad_scaler.h"
#include "mantissa/train/precision_registry.h"
#include "fp8_options.h"
#include "optimizer_choice.h"
#include "mantissa/io/safetensors.h"
#include "quant_options.h"

namespace mantissa::app {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void validate(const TrainOptions& o, const GptOptions& g) {
  MANTISSA_CHECK(g.max_steps >= 1, "train", "--max-steps must be at least 1, got {}", g.max_steps);
  MANTISSA_CHECK(o.batch_size >= 1, "train", "--batch-size must be at least 1, got {}",
                 o.batch_size);
  MANTISSA_CHECK(std::isfinite(o.lr) && o.lr > 0, "train", "--lr must be positive, got {}", o.lr);
  MANTISSA_CHECK(g.context >= 1 && g.eval_interval >= 1 && g.eval_batches >= 1, "train",
                 "context, eval interval and eval batches must be positive");
  MANTISSA_CHECK(!o.master_weights && !o.stochastic_rounding, "train",
                 "--master-weights and --stochastic-rounding are not supported for --model gpt");
  // The GPT loop has its own schedule (warm-up + cosine, clipping at norm 1) and no Trainer
  // behind it yet: refuse the Trainer-only options instead of ignoring them.
  const TrainOptions defaults;
  const std::vector<std::pair<const char*, bool>> trainer_only = {
      {"--checkpoint-dir", !o.checkpoint_dir.empty()},
      {"--resume", !o.resume.empty()},
      {"--logger", !o.logger.empty()},
      {"--accumulate-grad-batches", o.accumulate_grad_batches != defaults.accumulate_grad_batches},
      {"--gradient-clip-val", o.gradient_clip_val != defaults.gradient_clip_val},
      {"--lr-schedule", o.lr_schedule != defaults.lr_schedule},
      {"--limit-train-batches", o.limit_train_batches != defaults.limit_train_batches},
      {"--val-check-interval", o.val_check_interval != defaults.val_check_interval}};
  for (const auto& [flag, given] : trainer_only) {
    MANTISSA_CHECK(!given, "train",
                   "{} is not supported for --model gpt yet (it trains by --max-steps with its own "
                   "warm-up + cosine schedule and gradient clipping at norm 1)",
                   flag);
  }
}

// Linear warm-up to the peak, then cosine decay to 10% of it at max_steps.
double lr_at(int64_t step, double peak, const GptOptions& g) {
  if (step < g.warmup_steps) return peak * static_cast<double>(step + 1) / g.warmup_steps;
  const double span = static_cast<double>(std::max<int64_t>(1, g.max_steps - g.warmup_steps));
  const double t = std::min(1.0, static_cast<double>(step - g.warmup_steps) / span);
  return peak * (0.1 + 0.45 * (1 + std::cos(std::numbers::pi * t)));
}

// The forward pass in the plugin's step scope (autocast for the "-mixed" precisions).
Tensor forward(models::GPT& model, const Tensor& x, train::Precision& p) {
  train::ScopePtr scope = p.forward_context();
  return model.forward(x);
}

// Mean loss over the fixed validation windows (nats per character).
double validation_loss(models::GPT& model, const std::vector<std::pair<Tensor, Tensor>>& batches,
                       train::Precision& p) {
  NoGradGuard no_grad;
  model.eval();
  double total = 0;
  int64_t count = 0;
  for (const auto& [x, y] : batches) {
    total += models::GPT::loss(forward(model, x, p), y).item() * static_cast<double>(y.numel());
    count += y.numel();
  }
  model.train();
  return total / static_cast<double>(count);
}

}  // namespace

TrainMetrics run_gpt_training(const TrainOptions& o, const GptOptions& g) {
  validate(o, g);
  // The same plugins as the Trainer: parameter dtype, step scope, loss scaling and clipping.
  // nf4, nf4-dq, fp4, fp4-dq, int8, int8-training: the bitsandbytes plugin with the
  // --quant-* options; the other names through the precision registry (with --fp8-* settings).
  std::shared_ptr<train::Precision> plugin = make_quant_plugin(o.precision, o.quant);
  if (!plugin) {
    const std::string canonical = train::normalize_precision(o.precision);
    plugin = train::make_precision(
        canonical, {.extra = settings_for(canonical, o.precision_options, /*strict=*/true)});
  }
  train::Precision& precision = *plugin;
  validate_quant_options(o.quant);
  const std::string name = precision.precision();
  if (o.threads > 0) omp_set_num_threads(o.threads);
  if (precision.param_dtype() == kBFloat16 || name == "bf16-mixed") warn_once_if_bf16_emulated();
  const data::TextCorpus corpus(g.text);
  const auto val_batches =
      corpus.sequential_batches(/*train=*/false, o.batch_size, g.context, g.eval_batches);

  manual_seed(o.seed);
  Generator batch_gen(o.seed + 1), dropout_gen(o.seed + 2), sample_gen(o.seed + 3);
  reset_peak_memory_stats();
  const int64_t baseline_bytes = memory_allocated();
  TrainMetrics m;
  // Built inside the plugin's init scope (the bitsandbytes plugin quantizes each block as soon
  // as the next one is built), unless --init-from brings full-precision weights to load first.
  std::unique_ptr<models::GPT> built;
  {
    train::ScopePtr scope =
        build_in_init_scope(o.quant) ? precision.module_init_context() : nullptr;
    built = std::make_unique<models::GPT>(models::GPTConfig{.context = g.context,
                                                            .layers = g.layers,
                                                            .width = g.width,
                                                            .heads = g.heads,
                                                            .dropout = g.dropout,
                                                            .tie_embeddings = g.tie_embeddings,
                                                            .dtype = precision.param_dtype()},
                                          &dropout_gen);
  }
  models::GPT& model = *built;
  prepare_model_for_finetuning(model, &precision, o.quant, m);
  // Lightning's Precision.convert_module: FP8 plugins swap Linear/LayerNorm layers here (the
  // bitsandbytes plugin already converted the model in prepare_model_for_finetuning).
  if (!is_quantized_precision(o.precision)) precision.convert_module(model);
  OptimizerChoice choice;
  choice.name = o.optimizer;
  choice.lr = o.lr;
  choice.weight_decay = o.weight_decay;
  choice.fp32_state = precision.param_dtype() == kFloat16;
  choice.master_weights = o.master_weights;
  choice.stochastic_rounding = o.stochastic_rounding;
  choice.optim_bits_32 = split_names(o.optim_bits_32);
  // bitsandbytes' advice for 8-bit optimizers: embeddings keep 32-bit state.
  choice.embeddings_32bit = true;
  const std::shared_ptr<optim::Optimizer> optimizer_ptr = make_optimizer(choice, model);
  optim::Optimizer& optimizer = *optimizer_ptr;

  m.precision = name;
  m.model = "gpt";
  m.batch_size = o.batch_size;
  m.threads = omp_get_max_threads();
  m.seed = o.seed;
  m.parameters = m.total_parameters.value_or(model.parameter_count());
  if (!o.quiet) {
    fmt::print(
        "mantissa train: model gpt ({} layers, width {}, {} heads, context {}, {} parameters), "
        "precision {}, {} threads\ncorpus {} ({} files): {} training / {} validation bytes\n",
        g.layers, g.width, g.heads, g.context, m.parameters, name, m.threads, corpus.path(),
        corpus.files().size(), corpus.train_text().size(), corpus.val_text().size());
  }

  const auto run_start = Clock::now();
  double train_seconds = 0, loss_sum = 0;
  int64_t loss_count = 0;
  auto evaluate = [&](int64_t step) {
    const double v = validation_loss(model, val_batches, precision);
    m.val_loss_steps.push_back(step);
    m.val_loss_curve.push_back(v);
    m.test_loss.push_back(v);
    const double train_mean = loss_count ? loss_sum / static_cast<double>(loss_count) : NAN;
    m.train_loss.push_back(train_mean);
    if (!o.quiet) {
      fmt::print("step {}/{}  train loss {:.4f}  val loss {:.4f} nats/char  {:.0f} tokens/s\n",
                 step, g.max_steps, train_mean, v,
                 static_cast<double>(step * o.batch_size * g.context) / train_seconds);
      std::fflush(stdout);
    }
    loss_sum = 0;
    loss_count = 0;
  };
  for (int64_t step = 0; step < g.max_steps; ++step) {
    const auto t0 = Clock::now();
    optimizer.set_lr(lr_at(step, o.lr, g));
    auto [x, y] = corpus.batch(/*train=*/true, o.batch_size, g.context, &batch_gen);
    double loss_value = NAN;
    // Lightning's step sequence through the plugin: forward + backward (of the scaled loss
    // under 16-mixed) in the closure, then unscale, clipping at norm 1 and the (possibly
    // skipped) optimizer step.
    precision.optimizer_step(
        optimizer,
        [&] {
          Tensor loss = models::GPT::loss(forward(model, x, precision), y);
          loss_value = loss.item();
          if (!std::isfinite(loss_value) && precision.scaler() == nullptr) {
            fail("train",
                 "the loss became {} at step {} in {}; lower --lr (now {}) or use a wider "
                 "precision",
                 loss_value, step, name, o.lr);
          }
          optimizer.zero_grad();
          precision.backward(precision.pre_backward(loss));
          return loss;
        },
        [&] { precision.clip_gradients(optimizer, 1.0, train::GradClipAlgorithm::kNorm); });
    train_seconds += seconds_since(t0);
    if (std::isfinite(loss_value)) {
      loss_sum += loss_value;
      ++loss_count;
    }
    if ((step + 1) % g.eval_interval == 0 || step + 1 == g.max_steps) evaluate(step + 1);
  }
  const double tokens = static_cast<double>(g.max_steps * o.batch_size * g.context);
  m.steps = g.max_steps;
  m.val_loss_nats_per_char = m.val_loss_curve.back();
  m.tokens_per_second = tokens / train_seconds;
  m.samples_per_second = static_cast<double>(g.max_steps * o.batch_size) / train_seconds;
  m.epoch_seconds.push_back(train_seconds);
  m.peak_memory_bytes = max_memory_allocated();
  m.peak_training_memory_bytes = max_memory_allocated() - baseline_bytes;
  if (amp::GradScaler* scaler = precision.scaler()) {
    m.skipped_steps = scaler->skipped_steps();
    m.final_loss_scale = scaler->get_scale();
  }
  if (g.sample_tokens > 0) {
    m.sample = model.sample(g.sample_prompt, g.sample_tokens, g.temperature, g.top_k, &sample_gen);
    if (!o.quiet)
      fmt::print("sample (temperature {}, top-k {}):\n{}\n", g.temperature, g.top_k, *m.sample);
  }
  if (!g.save_weights.empty()) {
    io::NamedTensors tensors;
    for (const auto& [name, t] : model.state_dict()) tensors.emplace_back("model." + name, t);
    io::save_safetensors(g.save_weights, tensors, {{"precision", name}, {"model", "gpt"}});
    if (!o.quiet) fmt::print("model weights written to {}\n", g.save_weights);
  }
  m.total_seconds = seconds_since(run_start);
  m.optimizer = o.optimizer;
  m.optimizer_state_bytes = optimizer.state_bytes();
  if (!o.metrics_json.empty()) write_metrics_json(m, o.metrics_json);
  return m;
}

}  // namespace mantissa::app
