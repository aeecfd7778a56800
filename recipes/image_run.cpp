#include "mantissa/recipes/image_run.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <optional>
#include <sstream>

#include "mantissa/core/allocator.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/dist/communicator.h"
#include "mantissa/io/output_path.h"
#include "mantissa/kernels/kernel_paths.h"
#include "mantissa/mantissa.h"
#include "mantissa/models/cnn.h"
#include "mantissa/models/image_classifier.h"
#include "mantissa/models/mlp.h"
#include "mantissa/models/vit.h"
#include "mantissa/ops/matmul_precision.h"
#include "mantissa/recipes/byte_size.h"
#include "mantissa/recipes/diverged_result.h"
#include "mantissa/recipes/earlier_run_outputs.h"
#include "mantissa/recipes/init_from_check.h"
#include "mantissa/recipes/lr_find_run.h"
#include "mantissa/recipes/model_footprint.h"
#include "mantissa/recipes/model_hparams.h"
#include "mantissa/recipes/model_names.h"
#include "mantissa/recipes/precision_settings.h"
#include "mantissa/recipes/run_fit.h"
#include "mantissa/recipes/run_hparams.h"
#include "mantissa/recipes/thread_count.h"
#include "mantissa/recipes/trainer_setup.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/precisions/apex_amp_precision.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"
#include "mantissa/train/progress_bar_callback.h"
#include "mantissa/train/report/logger.h"
#include "mantissa/train/signals.h"
#include "mantissa/train/trainer.h"

namespace mantissa::recipes {

std::optional<std::vector<int64_t>> parse_hidden_sizes(const std::string& hidden) {
  // getline yields no item after a last comma: "16," read as 16 (a file's recorded --hidden,
  // or a caller other than the command line, whose flags comma_list checks).
  if (!hidden.empty() && hidden.back() == ',') return std::nullopt;
  std::vector<int64_t> sizes;
  std::stringstream ss(hidden);
  for (std::string item; std::getline(ss, item, ',');) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::logic_error&) {
      return std::nullopt;
    }
    if (used != item.size() || used == 0 || v <= 0) return std::nullopt;
    sizes.push_back(v);
  }
  if (sizes.empty()) return std::nullopt;
  return sizes;
}

namespace {

std::vector<int64_t> parse_hidden(const std::string& s) {
  MANTISSA_CHECK(!s.empty(), "train", "--hidden needs at least one size");
  const std::optional<std::vector<int64_t>> sizes = parse_hidden_sizes(s);
  MANTISSA_CHECK(sizes.has_value(), "train",
                 "--hidden expects positive integers separated by commas, got '{}'", s);
  return *sizes;
}

void validate(const TrainOptions& o) {
  // run_evaluation checks the options it shares with train: its errors say "eval".
  const char* where = o.evaluate_checkpoint.empty() ? "train" : "eval";
  // The image models (the GPT is run_gpt_training's).
  check_model_name(o.model, where, {"mlp", "cnn", "vit"});
  if (o.model == "vit") check_vit_patch(o.vit_patch, where);
  MANTISSA_CHECK(o.epochs >= 1, where, "--epochs must be at least 1, got {}", o.epochs);
  MANTISSA_CHECK(o.batch_size >= 1, where, "--batch-size must be at least 1, got {}", o.batch_size);
  MANTISSA_CHECK(std::isfinite(o.lr) && o.lr > 0, where, "--lr must be positive, got {}", o.lr);
  // Checked here, before the data and model load (the optimizer refused it only then, as
  // "[AdamW] Invalid weight_decay value", naming no flag).
  MANTISSA_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, where,
                 "--weight-decay must be a finite number >= 0, got {}", o.weight_decay);
  MANTISSA_CHECK(o.train_subset >= 0, where, "--train-subset must not be negative");
  MANTISSA_CHECK(
      o.lr_schedule == "constant" || o.lr_schedule == "cosine" || o.lr_schedule == "onecycle" ||
          o.lr_schedule == "plateau",
      where, "unknown --lr-schedule '{}'; valid values are: constant, cosine, onecycle, plateau",
      o.lr_schedule);
  MANTISSA_CHECK(o.log_every_n_steps >= 1, where, "--log-every-n-steps must be at least 1, got {}",
                 o.log_every_n_steps);
  MANTISSA_CHECK(o.threads >= 0, where, "--threads must be at least 1, got {}", o.threads);
  MANTISSA_CHECK(o.logger.empty() || o.logger == "csv" || o.logger == "tensorboard", where,
                 "unknown --logger '{}'; valid values are: csv, tensorboard", o.logger);
  parse_hidden(o.hidden);
  if (!o.overfit_batches.empty()) parse_batch_limit(o.overfit_batches, "--overfit-batches");
}

// Every output location is checked before data loading and training, so that a bad
// --checkpoint-dir or --metrics-json fails at once rather than after an epoch or at the end.
void check_outputs(const TrainOptions& o) {
  if (!o.checkpoint_dir.empty()) io::prepare_output_dir(o.checkpoint_dir, "--checkpoint-dir");
  if (!o.metrics_json.empty()) io::check_output_file(o.metrics_json, "--metrics-json");
  if (!o.logger.empty()) io::prepare_output_dir(o.log_dir, "--log-dir");
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct LoadedData {
  Tensor train_inputs, train_targets, test_inputs, test_targets;
};

// Fashion-MNIST as the precision wants it. "16-true"/"bf16-true" feed the model half-precision
// inputs (the plugin's convert_input); converting the images once, up front, spares a float32
// batch and a cast per step, and the float32 originals are freed on return, so the data sets
// themselves take half the memory too.
// with_train false (evaluation): only the test set is read.
LoadedData load_data(const TrainOptions& o, DType param_dtype, bool with_train = true) {
  const DType input_dtype = param_dtype.is_reduced_float() ? param_dtype : kFloat32;
  if (o.synthetic_data) {  // `mantissa plan`'s dry run: only the shapes matter
    Generator gen(o.seed);
    const int64_t n = std::max<int64_t>(o.train_subset, 1);
    // Flat rows of 784, as FashionMNIST gives them.
    return {randn({n, 784}, kFloat32, &gen).to(input_dtype), randint(0, 10, {n}, kInt64, &gen),
            Tensor(), Tensor()};
  }
  LoadedData out;
  if (with_train) {
    data::FashionMNIST train(o.data_dir, /*train=*/true);
    MANTISSA_CHECK(o.train_subset <= train.size(), "train",
                   "--train-subset {} is more than the {} training images (0 or leaving it out "
                   "uses them all)",
                   o.train_subset, train.size());
    const int64_t n = o.train_subset > 0 ? o.train_subset : train.size();
    out.train_inputs = train.inputs().narrow(0, 0, n).to(input_dtype);
    out.train_targets = train.targets().narrow(0, 0, n);
    if (n < train.size()) {
      // A subset is copied out, so the rest of the file's images are freed on return in every
      // precision: a float32 view (to() of a float32 tensor is the tensor itself) kept all 60 000
      // alive, and 32-true reported ten times the peak memory of bf16-true under --train-subset.
      if (out.train_inputs.dtype() == train.inputs().dtype())
        out.train_inputs = out.train_inputs.clone();
      out.train_targets = out.train_targets.clone();
    }
  }
  data::FashionMNIST test(o.data_dir, /*train=*/false);
  out.test_inputs = test.inputs().to(input_dtype);
  out.test_targets = test.targets();
  return out;
}

// One row per example: its index in the loader's order (the test set's, unshuffled), the
// arg-max of its logits and its label.
void write_predictions(const std::string& path, const std::vector<Tensor>& logits,
                       const Tensor& labels) {
  std::string csv = "index,predicted,label\n";
  int64_t row = 0;
  for (const Tensor& batch : logits) {
    const Tensor predicted = argmax(batch, /*dim=*/1).contiguous();
    const int64_t* p = predicted.data<int64_t>();
    for (int64_t i = 0; i < predicted.numel(); ++i, ++row) {
      csv += fmt::format("{},{},{}\n", row, p[i], labels.select(0, row).item<int64_t>());
    }
  }
  io::write_text_file_atomically(path, csv, "--predictions");
}

}  // namespace

void record_interruption(const train::Trainer& trainer, TrainMetrics& m) {
  record_interruption(trainer, m, *trainer.interrupt_signal());
}

void record_interruption(const train::Trainer& trainer, TrainMetrics& m, int signal) {
  m.interrupted_by = train::signal_name(signal);
  m.interrupted_after_step = trainer.global_step();
  m.resume_checkpoint = "";
  for (const auto& cb : trainer.callbacks()) {
    if (auto* mc = dynamic_cast<const train::ModelCheckpoint*>(cb.get())) {
      m.resume_checkpoint = mc->last_model_path();
    }
  }
}

[[noreturn]] void throw_interrupted(const TrainMetrics& m, int signal) {
  std::string resume =
      m.resume_checkpoint->empty()
          ? "no checkpoint was written (pass --checkpoint-dir to make a run resumable)"
          : fmt::format("resume with --resume {}", *m.resume_checkpoint);
  if (!m.interrupted_weights_written_to.empty()) {
    std::string written;
    for (const std::string& path : m.interrupted_weights_written_to)
      written += (written.empty() ? "" : " and ") + escape_untrusted(path, 4096);
    resume = fmt::format("the weights of step {} are written to {}; {}", *m.interrupted_after_step,
                         written, resume);
  }
  // Under mpirun a SIGTERM is most often the user's Ctrl-C, which mpirun hands to every rank as
  // SIGTERM; the --devices launcher names the signal it was sent (train::launcher_signal).
  const bool launcher = signal == SIGTERM && dist::launched_by_mpi() &&
                        dist::launcher_world_size() > 1 && !train::launcher_signal();
  const std::string by =
      launcher ? std::string("SIGTERM from the launcher (e.g. Ctrl-C)") : *m.interrupted_by;
  throw TrainingInterrupted(
      fmt::format("interrupted by {} after step {}; {}", by, *m.interrupted_after_step, resume),
      128 + signal, *m.interrupted_after_step);
}

const char* TrainingInterrupted::signal_name() const {
  return train::signal_name(exit_code_ - 128);
}

std::shared_ptr<nn::Module> make_model(const TrainOptions& o, DType dtype) {
  if (o.model == "cnn") return models::make_cnn(dtype);
  if (o.model == "vit") {
    return std::make_shared<models::ViT>(
        models::ViTConfig{.patch = o.vit_patch, .pool = o.vit_pool, .dtype = dtype});
  }
  return models::make_mlp(784, parse_hidden(o.hidden), 10, dtype);
}

namespace {
// The model of a run in the plugin's dtype: built inside its init scope when the quantized
// plugins need it, then quantized / given LoRA adapters (the counts go to m).
std::shared_ptr<nn::Module> build_model(const TrainOptions& o, train::Trainer& trainer,
                                        TrainMetrics& m) {
  check_init_from(o);  // its recorded sizes, before anything is built
  check_resume(o);
  // A size no machine holds (--hidden 100000000) is refused with the figures before anything is
  // allocated; the CNN's and the ViT's sizes are fixed.
  const bool training = o.evaluate_checkpoint.empty();
  if (o.model == "mlp") {
    const train::Precision& p = trainer.precision_plugin();
    const ModelFootprint footprint{
        .parameters = mlp_parameter_count(784, parse_hidden(o.hidden), 10),
        .bits = parameter_bits(p.precision(), p.param_dtype(), o.optimizer,
                               p.param_dtype() == kFloat16 || o.stochastic_rounding,
                               training && o.quant.lora_rank == 0),
        .precision = p.precision(),
        .optimizer = o.optimizer};
    check_model_fits(footprint, memory_bound(o.memory_limit, trainer.device().is_cpu()),
                     fmt::format("--model mlp --hidden {}", o.hidden));
    announce_large_build(footprint, training ? "train" : "eval", o.quiet);
  }
  // Nothing is trained yet: a Ctrl-C while the model is built ends the run at once.
  const train::ExitOnInterrupt building("building the model");
  std::shared_ptr<nn::Module> net;
  {
    train::ScopePtr scope = build_in_init_scope(o.quant) ? trainer.init_module() : nullptr;
    net = make_model(o, trainer.precision_plugin().param_dtype());
  }
  prepare_model_for_finetuning(*net, &trainer.precision_plugin(), o.quant, m, training);
  // Not for bench's and plan's runs (evaluate off), which measure speed and memory, where
  // random base weights cost the same.
  if (o.evaluate_checkpoint.empty() && o.evaluate) {
    warn_if_adapting_random_weights(o.precision, o.quant, !o.resume.empty(), o.model);
  }
  return net;
}
}  // namespace

TrainMetrics run_training(const TrainOptions& o) {
  // From the start: a Ctrl-C while the data load still stops the run at its first check.
  train::InterruptHandlers interrupt_handlers;
  validate(o);
  Float32MatmulPrecisionGuard matmul_precision(float32_matmul_precision());
  set_float32_matmul_precision(o.float32_matmul_precision);
  validate_quant_options(o.quant);
  refuse_earlier_training_outputs(o);  // before check_outputs makes the directory
  check_outputs(o);
  train::TrainerOptions topts = make_trainer_options(o);
  topts.max_epochs = o.epochs;
  topts.max_steps = o.max_steps;
  const std::shared_ptr<train::LearningRateFinder> lr_finder = setup_lr_find(o, topts);
  auto fit_start = std::make_shared<FitStartStep>();
  topts.callbacks.push_back(fit_start);
  train::Trainer trainer(topts);  // seeds the default generator
  log_run_hparams(trainer, run_hparams(o, trainer.options()));
  const DType param_dtype = trainer.precision_plugin().param_dtype();
  // transformer-engine's weights are bf16/f16 too, but the optimizer options are not part of
  // that precision (docs/fp8.md): refused as with the mixed precisions, not silently applied.
  const bool half_weights = param_dtype.is_reduced_float() &&
                            !train::precision_traits(trainer.precision_plugin().precision()).fp8;
  MANTISSA_CHECK(!(o.master_weights || o.stochastic_rounding) || half_weights, "train",
                 "--master-weights and --stochastic-rounding apply to 16-true and bf16-true only "
                 "(precision is {})",
                 o.precision);
  apply_thread_count(o.threads);
  const bool bf16_math = computes_in_bf16(trainer);
  if (bf16_math) warn_once_if_bf16_emulated();

  std::optional<train::ExitOnInterrupt> loading(std::in_place, "loading the data");
  const LoadedData data = load_data(o, param_dtype);
  loading.reset();
  auto train_set = std::make_shared<data::TensorDataset>(data.train_inputs, data.train_targets);
  MANTISSA_CHECK(!o.synthetic_data || !o.evaluate, "train", "synthetic data has no test set");
  auto test_set = o.synthetic_data
                      ? train_set
                      : std::make_shared<data::TensorDataset>(data.test_inputs, data.test_targets);
  data::DataLoader train_loader(train_set, o.batch_size, /*shuffle=*/true, o.seed);
  // Under a memory budget validation batches are no larger than training ones (no gradients:
  // they need less), so the budget the planner computed for training holds for them too.
  data::DataLoader test_loader(test_set, o.memory_limit.empty() ? 1000 : o.batch_size);
  // A fraction of a loader that leaves no batch: refused before the model is built and trained.
  check_batch_limits(trainer, train_loader, o.evaluate ? &test_loader : nullptr);

  manual_seed(o.seed);
  const int64_t baseline_bytes = memory_allocated();  // the data sets, held for the whole run
  std::optional<MemoryLimitGuard> budget;
  if (!o.memory_limit.empty()) {
    budget.emplace(MemoryLimit{.bytes = parse_byte_size(o.memory_limit, "--memory-limit"),
                               .exempt_bytes = baseline_bytes});
  }
  reset_peak_memory_stats();
  TrainMetrics finetune;  // the parameter counts of a quantized / LoRA model
  const std::shared_ptr<nn::Module> net = build_model(o, trainer, finetune);
  // The build's own high-water mark (--init-from holds the file's full-precision weights while
  // they are quantized) counts in the run's peak, not in the training's.
  const int64_t build_peak_bytes = max_memory_allocated();
  reset_peak_memory_stats();
  optim::OptimizerChoice adam;
  adam.name = o.optimizer;
  adam.lr = o.lr;
  adam.weight_decay = o.weight_decay;
  adam.master_weights = o.master_weights;
  adam.stochastic_rounding = o.stochastic_rounding;
  adam.optim_bits_32 = optim::split_names(o.optim_bits_32);
  optim::check_optimizer_name(adam.name);
  // Adam's second moment (squared gradients, ~1e-8 and below) underflows in float16, after
  // which eps = 1e-8 (0 in float16) divides the step into an overflow: keep the moments in
  // fp32 for 16-true. With stochastic rounding, fp32 moments are llm.c's recipe (a bf16
  // moment cannot decay by 0.999 per step: 0.999 * v rounds back to v).
  adam.fp32_state = param_dtype == kFloat16 || o.stochastic_rounding;

  TrainMetrics m;
  m.precision = trainer.precision_plugin().precision();
  if (const auto* ax = dynamic_cast<const train::ApexAmpPrecision*>(&trainer.precision_plugin())) {
    m.amp_backend = "apex";
    m.amp_level = train::apex_opt_level_name(ax->level());
  }
  m.trainable_parameters = finetune.trainable_parameters;
  m.total_parameters = finetune.total_parameters;
  m.quantized_bits_per_parameter = finetune.quantized_bits_per_parameter;
  m.model = o.model;
  m.epochs = o.fast_dev_run > 0 ? 1 : o.epochs;  // a fast_dev_run is one short epoch
  m.batch_size = o.batch_size;
  m.threads = omp_get_max_threads();
  m.seed = o.seed;
  m.bf16_emulated = bf16_math && !has_native_bf16();
  for (const auto& p : net->parameters()) m.parameters += p.numel();
  if (m.total_parameters) m.parameters = *m.total_parameters;
  int64_t schedule_steps = 0;  // cosine and onecycle run over the whole training
  if (o.lr_schedule == "cosine" || o.lr_schedule == "onecycle") {
    const int64_t batches = topts.limit_train_batches.resolve(
        batches_per_rank(trainer, train_loader), "--limit-train-batches", "train");
    const int64_t per_epoch = (batches + o.accumulate_grad_batches - 1) / o.accumulate_grad_batches;
    schedule_steps = o.max_steps > 0 ? o.max_steps : per_epoch * o.epochs;
  }
  // A range test prints its own report: no epoch lines (its "epoch" is cut short by the sweep).
  models::ImageClassifier module(net, adam, &m, o.loss_multiplier, o.quiet || lr_finder != nullptr,
                                 schedule_steps, o.lr_schedule);
  module.save_hyperparameters(image_model_hparams(o));
  // " 784-64-32-10" for the MLP (as bench writes it), "" for the other models.
  std::string hidden = o.hidden;
  std::replace(hidden.begin(), hidden.end(), ',', '-');
  const std::string shape = o.model == "mlp" ? fmt::format(" 784-{}-10", hidden) : "";
  if (!o.quiet) {
    const std::string apex = m.amp_backend.empty() ? "" : fmt::format(" (apex {})", m.amp_level);
    fmt::print("mantissa train: model {}{} ({} parameters), precision {}{}, optimizer {}, {}\n",
               o.model, shape, m.parameters, m.precision, apex, o.optimizer,
               workers_text(trainer, m.threads));
    if (!o.quant.init_from.empty()) fmt::print("{}\n", init_from_banner(o.quant.init_from));
    std::fflush(stdout);
  }

  const auto run_start = Clock::now();
  const int64_t batches_per_epoch = topts.limit_train_batches.resolve(
      batches_per_rank(trainer, train_loader), "--limit-train-batches", "train");
  const FitOutcome fit = run_fit(trainer, module, train_loader,
                                 {.val_loader = o.evaluate && !lr_finder ? &test_loader : nullptr,
                                  .resume = o.resume,
                                  .lr_find = lr_finder != nullptr,
                                  .limits = {.max_steps = o.max_steps,
                                             .max_epochs = o.epochs,
                                             .limit_train_batches = o.limit_train_batches,
                                             .resume = o.resume},
                                  .batches_per_epoch = batches_per_epoch,
                                  .fit_start = fit_start.get()},
                                 m);
  // The final accuracy must describe the weights the run ends with; the Trainer validates at
  // the end of every epoch (also one --max-steps cuts short), but a run without any step never
  // validated. The weights of a run stopped by divergence are not finite: no final evaluation.
  // It reads --limit-test-batches' batches (all by default): the last validation's numbers
  // when that read as many, else a test pass of that many (--limit-val-batches 2 validates
  // 2000 test images per epoch, the final accuracy is still the whole test set's).
  // An interrupted run stops quickly (Ctrl-C means stop): it reports what it measured and
  // evaluates nothing more, as the GPT's run does (a full test pass took 87 s in 64-true).
  if (o.evaluate && !fit.stopped() && !lr_finder && !trainer.interrupted()) {
    switch (evaluate_final_weights(trainer, module, test_loader,
                                   module.last_validation_step() == trainer.global_step())
                .source) {
      case FinalEvaluation::kNone:  // --limit-test-batches 0
      case FinalEvaluation::kValidate:
        break;
      case FinalEvaluation::kLastValidation:
        m.final_test_accuracy = module.last_val_acc();
        m.final_test_loss = module.last_val_loss();
        break;
      case FinalEvaluation::kTest:
        m.final_test_accuracy = module.last_test_acc();
        m.final_test_loss = module.last_test_loss();
        break;
    }
  }
  // Over the epochs' rates, which are the whole job's (every rank's samples) under ddp.
  double train_seconds = 0, samples = 0;
  for (size_t e = 0; e < m.epoch_seconds.size(); ++e) {
    train_seconds += m.epoch_seconds[e];
    samples += m.epoch_seconds[e] * m.epoch_samples_per_second[e];
  }
  if (trainer.interrupted()) {
    // The epoch the interrupt cut short reached no epoch end: its samples and time so far count
    // (every rank trains an equal shard, so the job's samples are this rank's times N).
    const auto partial = module.epoch_in_progress();
    if (partial.samples > 0 && partial.seconds > 0) {
      train_seconds += partial.seconds;
      samples += static_cast<double>(partial.samples * trainer.strategy().world_size());
    }
  }
  m.samples_per_second = train_seconds > 0 ? samples / train_seconds : 0;
  m.peak_memory_bytes = std::max(module.overall_peak_bytes(), build_peak_bytes);
  record_gpu_memory(m, trainer.device());
  m.peak_training_memory_bytes = module.training_peak_bytes() - baseline_bytes;
  m.total_seconds = seconds_since(run_start);
  record_fit_end(trainer, *net, o.optimizer, {"test", m.final_test_loss}, m);
  if (lr_finder) {
    report_lr_find(*lr_finder, o, fmt::format("{}{}, precision {}", o.model, shape, m.precision),
                   trainer.strategy().is_global_zero(), m);
  }
  return finish_fit(trainer, fit, m, o.metrics_json);
}

TrainMetrics run_evaluation(const TrainOptions& o) {
  constexpr int64_t kEvalBatchSize = 1000;  // test images per forward pass
  validate(o);
  MANTISSA_CHECK(!o.evaluate_checkpoint.empty(), "eval", "no checkpoint to evaluate");
  if (!o.metrics_json.empty()) io::check_output_file(o.metrics_json, "--metrics-json");
  if (!o.predictions_csv.empty()) io::check_output_file(o.predictions_csv, "--predictions");
  train::TrainerOptions topts = make_trainer_options(o);
  topts.enable_checkpointing = false;
  // The one evaluation is Trainer::validate's: it reads limit_val_batches.
  const EvalBatchLimit limit = eval_batch_limit(o);
  topts.limit_val_batches = limit.limit;
  train::Trainer trainer(topts);
  const DType param_dtype = trainer.precision_plugin().param_dtype();
  apply_thread_count(o.threads);
  if (computes_in_bf16(trainer)) warn_once_if_bf16_emulated();
  const LoadedData data = load_data(o, param_dtype, /*with_train=*/false);
  data::DataLoader test_loader(
      std::make_shared<data::TensorDataset>(data.test_inputs, data.test_targets), kEvalBatchSize);
  check_eval_batch_limit(trainer, test_loader, limit, "test");  // before the model is built
  TrainMetrics m;
  const std::shared_ptr<nn::Module> net = build_model(o, trainer, m);
  m.precision = trainer.precision_plugin().precision();
  m.fp8_recipe = fp8_recipe_metrics(trainer.precision_plugin());
  m.model = o.model;
  m.threads = omp_get_max_threads();
  for (const auto& p : net->parameters()) m.parameters += p.numel();
  if (m.total_parameters) m.parameters = *m.total_parameters;
  optim::OptimizerChoice unused;  // evaluation builds no optimizer
  models::ImageClassifier module(net, unused, &m, nullptr, /*quiet=*/true);
  reset_peak_memory_stats();
  const auto start = Clock::now();
  // Weights quantized on load (eval of a full-precision file in nf4, ...) are in place already.
  trainer.validate(module, test_loader, o.quant.init_from.empty() ? o.evaluate_checkpoint : "");
  // A NaN loss is no result to report (not "test loss nan" and exit status 0).
  MANTISSA_CHECK(std::isfinite(module.last_val_loss()), "eval", "{}",
                 non_finite_eval_message(o.evaluate_checkpoint, "test", module.last_val_loss(),
                                         trainer.precision_plugin().precision()));
  m.final_test_accuracy = module.last_val_acc();
  m.final_test_loss = module.last_val_loss();
  m.evaluated_checkpoint = o.evaluate_checkpoint;
  m.batch_size = kEvalBatchSize;
  if (!o.predictions_csv.empty()) {
    write_predictions(o.predictions_csv, trainer.predict(module, test_loader), data.test_targets);
  }
  m.peak_memory_bytes = module.overall_peak_bytes();
  m.total_seconds = seconds_since(start);
  if (!o.metrics_json.empty()) write_metrics_json(m, o.metrics_json);
  return m;
}

}  // namespace mantissa::recipes
