#pragma once
// Trainer: runs a TrainModule's training, validation and test loops with a precision plugin
// (Lightning's Trainer). The loop calls the hooks in Lightning's order, accumulates gradients,
// clips them through the plugin after unscaling, steps LR schedulers, logs, checkpoints and
// resumes bit for bit from a checkpoint (docs/trainer.md).
//
//   train::TrainerOptions opts;
//   opts.precision = "bf16-mixed";
//   opts.max_epochs = 2;
//   train::Trainer trainer(opts);
//   MyModule module;                   // a TrainModule
//   trainer.fit(module, train_loader, &val_loader);
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mantissa/data/dataloader.h"
#include "mantissa/train/callback.h"
#include "mantissa/train/checkpoint/run_config.h"
#include "mantissa/train/precision.h"
#include "mantissa/train/rank_agreed_error.h"
#include "mantissa/train/report/logger.h"
#include "mantissa/train/report/profiler.h"
#include "mantissa/train/strategy.h"
#include "mantissa/train/train_module.h"

namespace mantissa::amp {
class GradScaler;
}

namespace mantissa::train {

class GraphedStep;

// How many batches of an epoch to use: all, a count, or a fraction of the loader (Lightning's
// int / float values of limit_*_batches and val_check_interval).
class BatchLimit {
 public:
  BatchLimit() = default;  // the whole epoch
  static BatchLimit batches(int64_t n);
  static BatchLimit fraction(double f);  // in [0, 1]
  // The batches that limit_*_batches or overfit_batches leave of an epoch of `total`:
  // min(total, count), or int(total * fraction) as Lightning has it. A fraction > 0 that leaves
  // no batch of a non-empty loader is an error, as in Lightning (not quietly raised to one
  // batch): `option` names the setting as the user gave it ("limit_val_batches", or the flag
  // "--limit-val-batches"), `loader` the data ("train", "val", "test"), and the message gives
  // the smallest fraction that works.
  int64_t resolve(int64_t total, std::string_view option, std::string_view loader) const;
  // val_check_interval's batches: as resolve, but at least one for a fraction > 0 (Lightning's
  // max(1, int(total * fraction))).
  int64_t resolve_interval(int64_t total) const;
  bool is_fraction() const { return is_fraction_; }
  double value() const { return value_; }

 private:
  bool is_fraction_ = true;
  double value_ = 1.0;
};

struct TrainerOptions {
  std::string precision = "32-true";  // see precision_registry.h
  // Plugin-specific settings handed to the precision's factory as PrecisionOptions::extra
  // (e.g. {"fp8_recipe", "delayed"}); a plugin rejects keys it does not know.
  std::map<std::string, std::string> precision_options;
  // Lightning 1.x's amp_backend ("native", or "apex" for Apex's O0-O3 with precision
  // "16-mixed") and amp_level ("O2" when empty); apex_amp_precision.h.
  std::string amp_backend = "native";
  std::string amp_level;
  // "cpu", "gpu" / "cuda" (the first CUDA GPU), or "auto": the GPU when one can be used and the
  // precision runs there (resolve_accelerator), else the CPU.
  std::string accelerator = "auto";
  // Stops at whichever comes first; max_epochs unset with max_steps < 0 means 1000 epochs
  // (Lightning's default).
  std::optional<int64_t> max_epochs;
  int64_t max_steps = -1;  // optimizer steps; -1: no limit
  // Training goes on, whatever sets should_stop (EarlyStopping, a callback), until this many
  // epochs have ended and this many optimizer steps were taken (Lightning's min_epochs /
  // min_steps); it then stops at the first batch end where both are reached. 0: no minimum.
  // max_epochs and max_steps end training regardless.
  int64_t min_epochs = 0;
  int64_t min_steps = 0;
  // A budget of training time (Lightning's max_time): once spent, training stops after the
  // current optimizer step as an early stop does (the epoch ends with its validation and
  // checkpoints, last.safetensors with save_last). A Timer callback (timer.h) does it; a
  // resumed run counts the checkpoint's training time too. parse_max_time reads Lightning's
  // "DD:HH:MM:SS". Ignored when a Timer is among the callbacks, as in Lightning.
  std::optional<std::chrono::duration<double>> max_time;
  BatchLimit limit_train_batches;
  BatchLimit limit_val_batches;
  BatchLimit limit_test_batches;
  BatchLimit limit_predict_batches;  // the first batches of the loader predict returns
  // Validate every n training batches (count) or fraction of an epoch; always at epoch end,
  // also an epoch that max_steps ends early.
  BatchLimit val_check_interval;
  // Validate only after every n-th training epoch (val_check_interval still applies inside
  // those epochs).
  int64_t check_val_every_n_epoch = 1;
  // Validation batches run before training starts, to catch a broken validation_step early;
  // their metrics are discarded. -1: the whole validation loader. (Lightning's default is 2;
  // here 0, because on a CPU the check costs real time.)
  int64_t num_sanity_val_steps = 0;
  // > 0: a smoke test over that many batches of training, validation, test and predict, one epoch,
  // no checkpoints, no loggers, no early stopping (Lightning's fast_dev_run).
  int64_t fast_dev_run = 0;
  // Train (and validate) on the same first batches every epoch, in order, without shuffling:
  // a count or a fraction of the training loader (Lightning's overfit_batches). Unset: off.
  std::optional<BatchLimit> overfit_batches;
  int64_t accumulate_grad_batches = 1;
  // For a module with an item-weighted loss (TrainModule::loss_items, transformers'
  // average_tokens_across_devices): true counts the items of every rank's batches, so a step's
  // loss and gradient are the mean over all the items of the global batch, as one process with
  // the whole batch computes them (one all-reduce of the count per step). false counts this
  // rank's only: each rank's mean, averaged over the ranks (PyTorch's DDP), so a rank with few
  // items weighs as much as one with many. One process: no difference.
  bool average_items_across_ranks = true;
  double gradient_clip_val = 0;  // <= 0: no clipping
  std::string gradient_clip_algorithm = "norm";
  std::optional<uint64_t> seed;  // manual_seed(seed) when the Trainer is built
  int64_t log_every_n_steps = 50;
  std::string default_root_dir = ".";
  bool enable_progress_bar = true;  // used by a progress-bar callback
  // Prints model_summary() of the module when fit starts (ModelSummary callback).
  bool enable_model_summary = false;
  // Adds a ModelCheckpoint with its defaults when none is among the callbacks, as Lightning's:
  // the latest epoch's checkpoint, default_root_dir/checkpoints/epoch=E-step=S.safetensors
  // (last.safetensors only when a signal stops the run).
  bool enable_checkpointing = true;
  std::vector<std::shared_ptr<Callback>> callbacks;
  std::vector<std::shared_ptr<Logger>> loggers;
  // Anomaly detection for the whole fit (Lightning's detect_anomaly, docs/anomaly.md): the
  // first op whose output or gradient is NaN/inf stops the run with an error naming the op,
  // its inputs and the layer; under a loss scaler (16-mixed) skipped steps and scale changes
  // are reported with their step number instead.
  bool detect_anomaly = false;
  // The forward and backward of each training batch replayed as one CUDA graph
  // (train::GraphedStep, docs/cuda.md "CUDA graphs"): for a module that gives
  // TrainModule::training_loss, on a GPU, with automatic optimisation, one process and no
  // gradient accumulation or anomaly detection (each refused with its reason at fit). A capture
  // the graph cannot hold (dropout, a host read in the loss) warns once and runs eagerly.
  bool cuda_graphs = false;
  // A plugin instead of `precision` (giving both throws, as in Lightning; `precision` left at
  // "32-true" or "" counts as not given).
  std::shared_ptr<Precision> plugin;
  // Times the Trainer's actions, every hook and the op families; its report is printed when
  // fit, validate or test ends (make_profiler("simple"), profiler.h). Null: no profiling.
  std::shared_ptr<Profiler> profiler;
  // Data parallelism over MPI ranks (docs/distributed.md): strategy "auto", "ddp", "zero1"
  // (ddp with the optimizer state sharded) or "single_device"; devices (-1: as many ranks as mpirun
  // started); sync_batchnorm; the gradient reducer's bucket size and bf16 compression. See
  // StrategyOptions (strategy.h).
  std::string strategy = "auto";
  int64_t devices = -1;
  bool sync_batchnorm = false;
  dist::DDPOptions ddp;
  double collective_timeout_s = 600;  // StrategyOptions::collective_timeout_s (0: forever)
  bool sharded_checkpoints = false;   // StrategyOptions::sharded_checkpoints
};

// Thrown by fit when the loss or the weights stop being finite (the run diverged). A
// mantissa::Error like any other; a caller that compares runs (`mantissa compare`) reports it for
// that run and goes on with the others.
class TrainingDiverged : public RankAgreedError {
 public:
  using RankAgreedError::RankAgreedError;
  // Thrown by every rank of the job together, with the same message (one process: always).
  // The Trainer's own divergence checks throw these: under ddp the ranks agree before any
  // stops (a rank stopping alone left the others waiting in a collective, and the job was
  // aborted without its metrics), so the job can end as one process does, with no MPI_Abort.
  static TrainingDiverged on_every_rank(const std::string& message) {
    return TrainingDiverged(message, /*every_rank=*/true);
  }
};

class Trainer {
 public:
  explicit Trainer(TrainerOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // A scope in which new layers create their parameters in the plugin's dtype (bf16-true: no
  // float32 copy of any weight is ever allocated). Keep the returned object alive while
  // building the model.
  [[nodiscard]] ScopePtr init_module();

  // Trains. val_loader may be null (no validation). ckpt_path: resume from that checkpoint
  // (weights, optimizer, scaler, schedulers, RNG, epoch and position in the epoch, step-loss
  // history); what the new run may change is checked first (docs/trainer.md). A SIGINT or
  // SIGTERM seen by InterruptHandlers (signals.h) ends it after the current batch, with
  // interrupted() true.
  void fit(TrainModule& module, const data::DataLoader& train_loader,
           const data::DataLoader* val_loader = nullptr, const std::string& ckpt_path = "");
  // One pass of validation_step / test_step over the loader; returns the epoch metrics.
  // ckpt_path: first load the weights of that checkpoint (or weights file) into the module,
  // after the plugin converted it (load_checkpoint_weights, checkpoint.h); "best" and "last"
  // name the ModelCheckpoint callback's best and last checkpoints, as in Lightning.
  std::map<std::string, double> validate(TrainModule& module, const data::DataLoader& loader,
                                         const std::string& ckpt_path = "");
  std::map<std::string, double> test(TrainModule& module, const data::DataLoader& loader,
                                     const std::string& ckpt_path = "");
  // Runs predict_step over every batch of the loader (in order, no gradients,
  // the module in eval mode, inside the plugin's forward context) and returns what each
  // returned, detached; bf16/fp16 outputs come back as float32, as the plugins' outputs do in
  // Lightning. ckpt_path: as for validate. Under ddp the ranks share the batches and each
  // returns the whole list, as one process would (docs/distributed.md).
  std::vector<Tensor> predict(TrainModule& module, const data::DataLoader& loader,
                              const std::string& ckpt_path = "");

  // Writes a checkpoint of the current state (one safetensors file, atomically).
  void save_checkpoint(const std::string& path);

  // ---- state ----
  const TrainerOptions& options() const { return options_; }
  Precision& precision_plugin() { return *plugin_; }
  // Where the module and batches live (Lightning's trainer.strategy.root_device).
  Device device() const { return device_; }
  Profiler* profiler() const { return options_.profiler.get(); }
  // How the fit is spread over processes (single device, or ddp: rank, world size).
  Strategy& strategy() { return *strategy_; }
  const Strategy& strategy() const { return *strategy_; }
  TrainModule* module() const { return module_; }
  // The (first) optimizer of configure_optimizers, and all of them in order.
  optim::Optimizer* optimizer() const { return config_.optimizer.get(); }
  const std::vector<std::shared_ptr<optim::Optimizer>>& optimizers() const {
    return config_.optimizers;
  }
  const std::vector<LRSchedulerConfig>& lr_schedulers() const { return config_.lr_schedulers; }
  const std::vector<std::shared_ptr<Callback>>& callbacks() const { return callbacks_; }
  int64_t current_epoch() const { return epoch_; }
  int64_t global_step() const { return global_step_; }
  // The checkpoint the current fit resumed from (Lightning's trainer.ckpt_path), "" for a new run.
  const std::string& ckpt_path() const { return ckpt_path_; }
  // Training batches of the current epoch already consumed.
  int64_t batches_in_epoch() const { return batches_in_epoch_; }
  // Epochs of training data consumed so far, a checkpoint's resumed position included: the
  // epochs trained whole plus the share of num_training_batches() trained in the epoch that
  // max_steps, a stop or an error cut short (2.5: two epochs and half the third). The epoch
  // count of Hugging Face's TrainerState.epoch; current_epoch() counts a cut-short epoch whole.
  double epochs_trained() const;
  // Whether the batch just trained is followed by a validation that has not run yet: true
  // while its on_train_batch_end hooks run (a step checkpoint saved there records it, so a
  // resumed fit runs that validation first and reports the same curve as an unbroken run).
  bool validation_due() const { return validation_due_; }
  // Whether the training epoch in progress (or ending: its on_train_epoch_end hooks see it)
  // runs no validation because check_val_every_n_epoch leaves it out, while fit has a
  // validation loader. Its callback_metrics then hold the last validation's values, from
  // earlier weights: ModelCheckpoint (with a monitor) and EarlyStopping skip such epochs, as
  // Lightning's check after the validations instead.
  bool epoch_skips_validation() const { return epoch_skips_validation_; }
  // Whether a validation (not the sanity check) has run in the current fit.
  bool has_validated() const { return has_validated_; }
  // True while a validation that val_check_interval schedules inside a training epoch runs,
  // not the one after the epoch's last batch (nor one run only because max_steps or
  // should_stop ends the epoch, which its end follows at once): ModelCheckpoint saves after
  // it, as Lightning's checks after every validation when an epoch validates more than once.
  bool validating_mid_epoch() const { return validating_mid_epoch_; }
  // Number of training batches per epoch (after limit_train_batches); 0 outside fit.
  int64_t num_training_batches() const { return num_training_batches_; }
  // Latest value of every logged metric (epoch means for on_epoch metrics).
  const std::map<std::string, double>& callback_metrics() const { return callback_metrics_; }
  // One row to every logger at logger_step(), with "epoch" (current_epoch()) added unless the
  // row has its own, as Lightning's logger connector adds it: each row of metrics.csv says
  // which epoch it belongs to. Callbacks that log (LearningRateMonitor, Fp8StatsMonitor) send
  // their rows through here too.
  void send_to_loggers(const std::map<std::string, double>& metrics);
  // The step the loggers' rows carry (metrics.csv's "step" column), Lightning's count of the
  // training batches that ended with an optimizer step, taken before the batch in progress:
  // the first step's row is step 0, a validation after optimizer step N is logged at N - 1
  // (with that step's row), and so is the epoch's row of epoch means. Outside a training
  // batch (epoch start, validate() or test() after fit) it is global_step().
  int64_t logger_step() const { return logger_step_; }
  // The loss of every optimizer step of the run (the mean over accumulated batches; under an
  // item-weighted loss their sum, the mean over the step's items), in order, including steps a
  // loss scaler skipped. A resumed fit starts with the checkpoint's
  // history, so this covers the whole run.
  const std::vector<double>& step_losses() const { return step_losses_; }
  // Under an item-weighted loss (TrainModule::loss_items), inside training_step: the factor
  // that turns the batch's summed item losses into its share of the optimizer step's loss,
  // world / (the items of the step's batches on every rank) with average_items_across_ranks
  // (the strategy's gradient mean over the ranks then leaves the sum over all items divided by
  // their count), else 1 / (this rank's items). 0 when the step holds no item at all.
  double item_loss_scale() const { return item_loss_scale_; }
  // Inside training_step: whether the batch is the last of its optimizer step (the step's
  // shares are all known: an item-weighted module logs their sum then).
  bool batch_ends_step() const { return batch_ends_step_; }
  // "train", "validate", "test", "predict" while a loop runs, "" otherwise.
  const std::string& stage() const { return stage_; }
  // True while the sanity-check validation before training runs (its metrics are discarded).
  bool sanity_checking() const { return sanity_checking_; }
  // Set by a callback to end fit after the current batch (with a validation first, when the
  // loop validates, as Lightning's), once min_epochs and min_steps are reached: until then it
  // stays set and training goes on.
  bool should_stop = false;
  // True when the last fit stopped early for a signal (InterruptHandlers, signals.h): it
  // stopped after a complete training batch, before its epoch ended, and the ModelCheckpoint
  // callbacks wrote last.safetensors.
  bool interrupted() const { return interrupt_signal_.has_value(); }
  std::optional<int> interrupt_signal() const { return interrupt_signal_; }
  // With detect_anomaly under a loss scaler: one line per skipped step or loss-scale change,
  // as printed to stderr ("step 12: ...").
  const std::vector<std::string>& anomaly_events() const { return anomaly_events_; }
  // The settings of the current fit that a checkpoint stores to check a resume against.
  const RunConfig& run_config() const { return run_config_; }

  // Manual optimisation, called by TrainModule::manual_backward / manual_step /
  // clip_gradients (train_module.h): only inside training_step of a module with
  // automatic_optimization = false.
  void manual_backward(const Tensor& loss);
  bool manual_step(optim::Optimizer& optimizer);
  void manual_clip_gradients(optim::Optimizer& optimizer, double clip_val,
                             GradClipAlgorithm algorithm);

  // Called by TrainModule::log.
  void log_metric(const std::string& name, double value, bool prog_bar, std::optional<bool> on_step,
                  std::optional<bool> on_epoch);
  // Metrics logged with prog_bar (for a progress bar).
  const std::map<std::string, double>& progress_bar_metrics() const { return prog_bar_metrics_; }

 private:
  friend struct CheckpointAccess;

  // The running sum of a metric logged on_epoch; forked: also logged on_step (the loggers get
  // the mean as <name>_epoch).
  struct EpochSum {
    double sum = 0;
    int64_t count = 0;
    bool forked = false;
  };

  // Attaches the module for `stage` ("fit", "validate", "test", "predict"): the setup hooks,
  // configure_model, the plugin's conversion, the move to the device.
  void setup(TrainModule& module, const std::string& stage);
  // The end of a stage that did not throw: the teardown hooks.
  void teardown(const std::string& stage);
  // A stage is ending with `exception`: every callback's on_exception.
  void notify_exception(const std::exception& exception);
  // validate() and test(): stage "validate" or "test" over `limit` batches of the loader.
  std::map<std::string, double> evaluate(TrainModule& module, const data::DataLoader& loader,
                                         const std::string& ckpt_path, const std::string& stage,
                                         const BatchLimit& limit);
  // Under ddp: every rank's predictions of its batches (r, r + N, ...) put back in batch order.
  std::vector<Tensor> interleave_ranks_predictions(const std::vector<Tensor>& mine,
                                                   int64_t batches);
  std::vector<Tensor> predict_impl(TrainModule& module, const data::DataLoader& loader,
                                   const std::string& ckpt_path);
  void fit_impl(TrainModule& module, const data::DataLoader& train_loader,
                const data::DataLoader* val_loader, const std::string& ckpt_path);
  void train_epoch(const data::DataLoader& train_loader, const data::DataLoader* val_loader,
                   int64_t start_batch);
  // The batch on the module's device (a copy when that is a GPU).
  data::Example batch_to_device(const data::Example& raw) const;
  void train_batch(const data::Example& raw, int64_t batch_idx, int64_t num_batches);
  // Training batch b of `order` from the loader. For a module with an item-weighted loss the
  // first batch of each optimizer step fetches the step's other batches too (held in
  // step_batches_ until their turn), counts their items (over the ranks with
  // average_items_across_ranks: one all-reduce) and sets item_loss_scale_.
  data::Example next_training_batch(const data::DataLoader& loader,
                                    const std::vector<int64_t>& order, int64_t b, int64_t n);
  // training_step of a module with automatic_optimization = false: it steps the optimizers.
  Tensor train_batch_manual(const data::Example& batch, int64_t batch_idx);
  // An automatic-optimisation batch whose forward and backward run through graphed_step_.
  Tensor graphed_forward_backward(const data::Example& batch, int64_t batch_idx);
  // What the eager and the graphed closure share: training_step's scope (the profiler action,
  // the plugin's forward context, the managed-precision check) around `body`; zero_grad between
  // its hooks; a step's loss value checked for divergence and kept for the step's mean.
  Tensor in_training_step_scope(const std::function<Tensor()>& body);
  void zero_grad_with_hooks(optim::Optimizer& opt);
  void record_training_loss(double value, const data::Example& batch, int64_t batch_idx);
  void check_cuda_graphs_allowed(const TrainModule& module) const;
  void check_optimizer_config(const TrainModule& module);
  void check_manual_call(const char* what) const;
  void send_step_metrics_every_n(int64_t steps_before);
  // validate / test / predict's ckpt_path: "best" and "last" name the ModelCheckpoint's files
  // (Lightning's), anything else is a path.
  std::string eval_checkpoint_path(const std::string& ckpt_path) const;
  void end_epoch();
  std::map<std::string, double> run_eval(const data::DataLoader& loader, const std::string& stage,
                                         const BatchLimit& limit);
  // The global batches an evaluation of `loader` runs under `limit`, the same on every rank:
  // the limit resolved against the longest shard's batches (rank 0's, which are one process's
  // with the global batch). A rank runs those of them its shard holds (a shorter shard may
  // lack the last one). Under ddp a collective: every rank calls it.
  // stage "validate" or "test": names limit_val_batches or limit_test_batches in the error for
  // a fraction that leaves no batch.
  int64_t evaluation_batches(const data::DataLoader& loader, const BatchLimit& limit,
                             const std::string& stage);
  // Under ddp: what the ranks logged on_epoch in a validation or test, summed over the ranks
  // (sums and counts), so callback_metrics, the loggers and the monitoring callbacks see the
  // whole set's values, the same on every rank.
  void sum_eval_metrics_over_ranks();
  void step_schedulers(const std::string& interval, int64_t count);
  // A non-finite loss under a loss scaler: what diverged when the weights are non-finite or
  // beyond float16's range (no scale can bring such a run back), else "" and the step is
  // skipped.
  std::string scaler_divergence_message(double loss) const;
  // After an epoch's or the run's last step: throws TrainingDiverged when a weight is no
  // longer finite (the step's loss was, so the loss check let it through).
  void check_weights_finite_after_step() const;
  // Under anomaly detection, after each optimizer step: throws autograd::AnomalyDetected
  // naming the first optimizer state buffer or parameter the step left non-finite. The step is
  // no recorded op, so without this the next forward would be blamed for its input.
  void check_update_under_anomaly() const;
  // After the fit's first optimizer step: warns once when an Adam-type optimizer keeps its
  // second moments in float16 (over float16 parameters, without fp32_state or master_weights).
  void warn_once_if_float16_adam_state();
  bool checked_float16_state_ = false;
  // The first training step's loss was checked to reach the parameters (train/loss_reach_check.h).
  bool checked_loss_reach_ = false;
  // The divergence a step's loss shows on this rank ("" for none): loss_diverged_message
  // without a loss scaler, scaler_divergence_message under one.
  // A batch whose input or target holds NaN or inf is named as the cause (the data, not the
  // training).
  std::string loss_divergence(double loss, const data::Example& example, int64_t batch) const;
  // Every rank calls this at the same point with its own finding ("" for none): when any rank
  // diverged, all throw TrainingDiverged::on_every_rank with the lowest such rank's message
  // (under ddp one collective, even when nothing diverged).
  void stop_if_any_rank_diverged(const std::string& own);
  // "epoch 2, batch 3 of the epoch" (1-based), or "epoch 2" for batch -1 (a manual step).
  std::string position_in_epoch(int64_t batch) const;
  // A non-finite loss without a loss scaler: what diverged, blaming the previous step when the
  // weights are already non-finite (its loss was finite, so its gradient or update was not).
  std::string loss_diverged_message(double loss, int64_t batch) const;
  // An optimizer refused the step over a non-finite gradient (optim::NonFiniteGradient):
  // TrainingDiverged naming the parameter as the module does.
  [[noreturn]] void throw_gradient_diverged(const optim::NonFiniteGradient& e, int64_t batch) const;
  // At an epoch's end: warns (once a run) when a loss scaler skipped at least half of the
  // epoch's optimizer steps, so a run whose weights hardly moved does not end silently.
  // After a validation or test: warns (once a run) when a loss it measured is not finite.
  void warn_if_loss_not_finite(const std::map<std::string, double>& results,
                               const std::string& stage);
  void warn_if_scaler_skipped_most(const std::optional<Precision::LossScaleState>& at_start,
                                   int64_t steps_at_start);
  // detect_anomaly under a loss scaler: logs a skipped step or a scale change of this step.
  void report_scaler_step(const amp::GradScaler& scaler, double scale_before,
                          int64_t skipped_before, const std::string& overflow_report);
  void run_sanity_check(const data::DataLoader& val_loader);
  void apply_fast_dev_run();
  // Sends the means of what was logged on_epoch as one row at `step`, and clears `sums`.
  void flush_epoch_metrics(std::map<std::string, EpochSum>& sums, int64_t step);
  // Batches of the open gradient-accumulation window at the position a checkpoint records
  // (0: at an optimizer step): their gradients are not in a checkpoint.
  int64_t accumulated_batches() const;
  void send_to_loggers(const std::map<std::string, double>& metrics, int64_t step);
  int64_t max_epochs() const;
  bool reached_max_steps() const;
  // Whether training may stop before max_epochs / max_steps: min_epochs epochs have ended and
  // min_steps steps were taken.
  bool can_stop_early() const;
  // should_stop, honoured: true when it is set and training may stop; says once a fit when it
  // is set too early.
  bool stop_requested();
  // Looks at the signal flag once; true (and remembered) when a signal has arrived.
  bool poll_interrupt();
  void record_run_config(const data::DataLoader& train_loader);

  TrainerOptions options_;
  std::shared_ptr<Precision> plugin_;
  std::shared_ptr<Strategy> strategy_;
  Device device_;  // the module's and the batches' device
  GradClipAlgorithm clip_algorithm_;
  std::vector<std::shared_ptr<Callback>> callbacks_;
  TrainModule* module_ = nullptr;
  OptimizerConfig config_;
  std::string stage_;
  std::string ckpt_path_;
  bool sanity_checking_ = false;
  bool in_manual_step_ = false;  // inside training_step under manual optimisation
  int64_t epoch_ = 0;
  int64_t global_step_ = 0;
  int64_t batches_in_epoch_ = 0;
  int64_t logger_step_ = 0;  // see logger_step()
  // Where an epoch that max_steps or should_stop cut short stopped: a checkpoint saved after
  // fit() resumes there (the counters have moved on to the next epoch, as Lightning's do).
  struct CutEpoch {
    int64_t epoch = 0, batches = 0, global_step = 0;
  };
  std::optional<CutEpoch> cut_epoch_;
  bool validation_due_ = false;
  // Resumed from a checkpoint written after an epoch's last batch but before its end (a step
  // checkpoint): that epoch's validation and end run first.
  bool epoch_end_due_ = false;
  bool in_train_epoch_end_ = false;  // the on_train_epoch_end hooks are running
  bool epoch_skips_validation_ = false;
  bool has_validated_ = false;
  bool validating_mid_epoch_ = false;
  bool scaler_warned_ = false;        // warn_if_scaler_skipped_most has said it in this run
  bool loss_warned_ = false;          // warn_if_loss_not_finite has said it in this run
  bool early_stop_deferred_ = false;  // stop_requested has said it in this run
  int64_t num_training_batches_ = 0;
  std::vector<double> window_losses_;
  // Item-weighted loss (TrainModule::loss_items): whether the current fit uses it, the step's
  // scale, the step's batches not trained yet, and whether the batch in training_step ends its
  // step.
  bool item_weighted_ = false;
  double item_loss_scale_ = 0;
  std::deque<data::Example> step_batches_;
  bool batch_ends_step_ = false;
  std::vector<double> step_losses_;
  std::unique_ptr<GraphedStep>
      graphed_step_;  // TrainerOptions::cuda_graphs, made at the first batch
  std::map<std::string, double> callback_metrics_;
  std::map<std::string, double> prog_bar_metrics_;
  // What training steps logged since the loggers' last row; forked: also logged on_epoch (the
  // loggers get it as <name>_step).
  struct StepMetric {
    double value = 0;
    bool forked = false;
  };
  std::map<std::string, StepMetric> step_metrics_;
  // The on_epoch values of the training epoch in progress, and of the evaluation in progress
  // (a validation inside an epoch leaves the epoch's alone: a checkpoint written then holds
  // them, so a resumed run's epoch means cover the whole epoch).
  std::map<std::string, EpochSum> epoch_sums_;
  std::map<std::string, EpochSum> eval_sums_;
  RunConfig run_config_;
  std::optional<int> interrupt_signal_;
  std::vector<std::string> anomaly_events_;
};

}  // namespace mantissa::train
