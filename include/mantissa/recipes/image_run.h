#pragma once
// The training run behind `mantissa train`: a reference model on Fashion-MNIST with AdamW in
// the chosen precision. Kept apart from the command-line parsing so tests can run it.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mantissa/core/error.h"
#include "mantissa/nn/module.h"
#include "mantissa/recipes/finetuning.h"
#include "mantissa/recipes/run_metrics.h"
#include "mantissa/train/callback.h"

namespace mantissa::recipes {

struct TrainOptions {
  std::string model = "mlp";
  std::string precision = "32-true";
  // "cpu" or "auto"; "gpu"/"cuda" are refused with the reason (precision_support.h).
  std::string accelerator = "cpu";
  // --amp-backend native|apex, --amp-level O0..O3, --amp-loss-scale (Apex's levels with
  // 16-mixed, docs/precision.md).
  std::string amp_backend = "native";
  std::string amp_level;
  std::string amp_loss_scale;
  // Plugin settings from the --fp8-* flags (precision_settings.h; the flags are
  // apps/fp8_options.h).
  std::map<std::string, std::string> precision_options;
  int epochs = 2;
  int64_t batch_size = 256;
  double lr = 1e-3;
  double weight_decay = 1e-2;  // AdamW's default
  // "adamw", "adam", "sgd", "adamw8bit" or "adam8bit" (docs/optimizers.md).
  std::string optimizer = "adamw";
  // 8-bit optimizers: comma-separated parameter-name substrings that keep 32-bit state.
  std::string optim_bits_32;
  uint64_t seed = 0;
  std::string hidden = "256";
  int64_t vit_patch = 7;             // --model vit: patch size (4 or 7)
  std::string vit_pool = "cls";      // --model vit: "cls" or "mean"
  int threads = 0;                   // 0: OpenMP's default (all cores)
  int64_t train_subset = 0;          // 0: the whole training set; else its first N images
  bool master_weights = false;       // bf16-true / 16-true: fp32 master copy in the optimizer
  bool stochastic_rounding = false;  // bf16-true: stochastic rounding of the update
  std::string metrics_json;
  std::string data_dir;
  bool quiet = false;         // no per-epoch lines
  bool model_summary = true;  // the model's layer table at the start (unless quiet)
  // Test hook: multiplies the loss of global step s by loss_multiplier(s) before backward
  // (used to force fp16 overflow). Null: no change.
  std::function<double(int64_t)> loss_multiplier;
  // Trainer options (docs/trainer.md).
  int64_t max_steps = -1;  // -1: no limit
  int64_t min_epochs = 0;  // early stopping cannot end the run before (0: no minimum)
  int64_t min_steps = 0;   // the same in optimizer steps
  std::string max_time;    // "DD:HH:MM:SS": stop once this much training time is spent
  // "constant", or "cosine": the learning rate decays from --lr to 0 over the run's
  // optimizer steps (CosineAnnealingLR stepped every optimizer step).
  std::string lr_schedule = "constant";
  int64_t accumulate_grad_batches = 1;
  double gradient_clip_val = 0;                  // 0: no clipping
  std::string gradient_clip_algorithm = "norm";  // "norm" or "value"
  std::string checkpoint_dir;                    // checkpoint every epoch + last.safetensors
  std::string resume;                            // checkpoint to continue from
  bool overwrite_output_dir = false;             // --overwrite-output-dir (earlier_run_outputs.h)
  std::string limit_train_batches = "1.0";       // "0.25": fraction, "10": batches
  std::string val_check_interval = "1.0";        // same forms
  // The batches of each validation and of the final evaluation after training (the image models'
  // final test accuracy, the GPT's final validation loss), in the same forms; "0" turns that
  // evaluation off. "" (not given): every batch for the image models, GptOptions::eval_batches
  // batches for the GPT (docs/cli.md, "Batch limits").
  std::string limit_val_batches;
  std::string limit_test_batches;
  bool progress_bar = true;
  std::string logger;                      // "", "csv" or "tensorboard"
  std::string log_dir = "lightning_logs";  // loggers write <log_dir>/version_<N>
  int64_t log_every_n_steps = 50;          // how often step metrics reach the loggers
  int64_t fp8_stats_every = 0;             // FP8 statistics' steps; 0: log_every_n_steps
  std::string profiler;                    // "" (none) or "simple": time per action/hook/op
  // Callbacks and smoke-test flags (docs/cli.md, "Stopping, checkpoints and smoke tests").
  std::string early_stopping_monitor;  // e.g. "val_loss"; empty: no early stopping
  std::string early_stopping_mode = "min";
  int64_t early_stopping_patience = 3;
  double early_stopping_min_delta = 0.0;
  std::string checkpoint_monitor;  // keep the best --save-top-k by this metric
  std::string checkpoint_mode = "min";
  int64_t save_top_k = -1;          // -1: every checkpoint
  int64_t every_n_train_steps = 0;  // > 0: checkpoint every n optimizer steps
  int64_t fast_dev_run = 0;
  std::string overfit_batches;  // "" off, else "0.25" or "10"
  int64_t check_val_every_n_epoch = 1;
  int64_t num_sanity_val_steps = 0;
  // Stop at the first op whose output or gradient is NaN/inf, naming it (docs/anomaly.md).
  bool detect_anomaly = false;
  bool cuda_graphs = false;  // --cuda-graphs: TrainerOptions::cuda_graphs (the GPT)
  // false: no validation and no final test evaluation (compare's timed runs measure
  // throughput only).
  bool evaluate = true;
  // `mantissa eval`: no training; load these weights (a checkpoint or --save-weights file)
  // and evaluate them on the test set (image models) or the validation text (gpt).
  std::string evaluate_checkpoint;
  // `mantissa eval --predictions FILE` (image models): also write each test image's predicted
  // class (Trainer::predict) as CSV rows "index,predicted,label".
  std::string predictions_csv;
  // Extra Trainer callbacks (compare's step timer; tests).
  std::vector<std::shared_ptr<train::Callback>> callbacks;
  QuantOptions quant;  // nf4/fp4/int8 precisions, LoRA, --init-from (quant_options.h)
  // Data parallelism (docs/distributed.md, distributed_launch.h).
  std::string strategy = "auto";  // "auto", "ddp", "single_device"
  int64_t devices = -1;           // > 1: re-executed under mpirun with that many ranks
  bool sync_batchnorm = false;
  bool ddp_bf16_compress = false;  // --ddp-bf16-compress: grad_reduce_dtype "bfloat16"
  // --grad-reduce-dtype: the dtype gradients are reduced in over the ranks, "float32" or
  // "bfloat16" (dist::DDPOptions::reduce_dtype).
  std::string grad_reduce_dtype = "float32";
  double ddp_bucket_cap_mb = 1.0;
  // --fsdp-param-dtype: the dtype fsdp all-gathers float32 parameters in, "float32",
  // "bfloat16" (bf16-mixed) or "float16" (16-mixed) (dist::DDPOptions::fsdp_param_dtype).
  std::string fsdp_param_dtype = "float32";
  bool no_fsdp_prefetch = false;    // --no-fsdp-prefetch: dist::DDPOptions::fsdp_prefetch off
  double collective_timeout = 600;  // --collective-timeout SECONDS (0: none)
  bool sharded_checkpoint = false;  // --sharded-checkpoint: zero1/zero2 ranks write their part
  // --memory-limit: a budget for the training ("8GiB"); the data sets loaded before are not
  // counted. Beyond it the allocator throws OutOfMemoryError (docs/memory_planner.md).
  std::string memory_limit;
  // --float32-matmul-precision highest|high|medium (mantissa/ops/matmul_precision.h), set for
  // the run and restored after it.
  std::string float32_matmul_precision = "highest";
  // --lr-find: the learning-rate range test instead of the training (lr_find_run.h): the lr
  // rises from MIN to MAX of lr_find_range over lr_find_steps optimizer steps; lr_find_plot:
  // an SVG of the losses over the lr ("" for none).
  bool lr_find = false;
  std::string lr_find_range = "1e-8,1";
  int64_t lr_find_steps = 100;
  std::string lr_find_plot;
  // `mantissa plan`'s dry runs: train_subset random images instead of Fashion-MNIST, no test
  // set (evaluate must be false).
  bool synthetic_data = false;
};

// After a signal stopped trainer.fit: records the signal, the step and the checkpoint to resume
// from in m, and builds the TrainingInterrupted (exit code 128 + signal) the run throws once
// its metrics JSON is written. Shared by the image and GPT runs.
void record_interruption(const train::Trainer& trainer, TrainMetrics& m);
// The same for a signal received after fit returned (the GPT's final sample).
void record_interruption(const train::Trainer& trainer, TrainMetrics& m, int signal);
[[noreturn]] void throw_interrupted(const TrainMetrics& m, int signal);

// Thrown by run_training after a SIGINT/SIGTERM stopped the run (the checkpoint and the
// metrics JSON are written by then); main() prints the message and exits with exit_code
// (128 + the signal, as a shell reports a process killed by it).
// compare and bench, which run several trainings and cannot resume, catch it and say so in
// their own words (signal_name, after_step).
class TrainingInterrupted : public Error {
 public:
  TrainingInterrupted(const std::string& message, int exit_code, int64_t after_step = -1)
      : Error(message), exit_code_(exit_code), after_step_(after_step) {}
  int exit_code() const { return exit_code_; }
  // "SIGINT", "SIGTERM" (from the exit code).
  const char* signal_name() const;
  // The optimizer step the run stopped after (-1: not known).
  int64_t after_step() const { return after_step_; }

 private:
  int exit_code_;
  int64_t after_step_;
};

// The sizes of a --hidden value ("1024,1024" -> {1024, 1024}), or nullopt when it is not a
// comma-separated list of positive integers.
std::optional<std::vector<int64_t>> parse_hidden_sizes(const std::string& hidden);

// The model of a run, built in `dtype` (the one place models are made).
std::shared_ptr<nn::Module> make_model(const TrainOptions& options, DType dtype);

// Trains, evaluates after every epoch and returns the metrics (also written to
// options.metrics_json when set). The final test accuracy is always that of the weights the run
// ends with: when the last validation did not see them (no step ran: --max-steps 0, a resumed
// run that had already finished), the test set is evaluated once more. Output locations are
// checked before anything else: a --checkpoint-dir that holds an earlier run's files (or others)
// is refused unless options.resume is a checkpoint of it or options.overwrite_output_dir is set
// (refuse_earlier_training_outputs, earlier_run_outputs.h), as `mantissa train` refuses it.
// SIGINT/SIGTERM stop the run after the current batch (a
// second one exits at once): last.safetensors and the metrics JSON are written, then
// TrainingInterrupted is thrown. Throws mantissa::Error on bad options or data, and when the
// loss becomes non-finite without a loss scaler to absorb it.
TrainMetrics run_training(const TrainOptions& options);

// `mantissa eval` of an image model: builds the model as `options` describe it in its
// precision, loads options.evaluate_checkpoint's weights and evaluates the test set (the
// training set is not read). Reports final_test_loss / final_test_accuracy; with
// options.predictions_csv, also predicts every test image and writes the classes there. The
// options are taken as they are: run_checkpoint_evaluation (checkpoint_evaluation.h) first
// takes what the file records and checks the file against them, as `mantissa eval` does.
TrainMetrics run_evaluation(const TrainOptions& options);

}  // namespace mantissa::recipes
