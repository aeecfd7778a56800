#pragma once
// `mantissa train --model gpt`: the byte-level GPT on a text corpus, trained by the library's
// Trainer (mantissa/models/language_model.h over data::TextWindowDataset): warm-up + cosine
// schedule, gradient clipping at norm 1 by default, periodic validation in nats per byte, and a
// sample at the end. Every Trainer option of `mantissa train` applies (docs/trainer.md, "The GPT").
#include <cstdint>
#include <optional>
#include <string>

#include "mantissa/models/gpt.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/recipes/run_metrics.h"

namespace mantissa::recipes {

struct GptOptions {
  static constexpr int64_t kDefaultMaxSteps = 2000;
  static constexpr int64_t kDefaultEvalInterval = 250;

  // How long to train. These replace TrainOptions::max_steps and ::epochs, whose defaults
  // are the image models'. Neither set: kDefaultMaxSteps steps. Only epochs set: that many
  // passes over the training windows. Both: whichever ends first (max_steps -1: no step
  // limit, needs epochs). max_steps 0 or below -1, and epochs below 1, are errors.
  std::optional<int64_t> max_steps;
  std::optional<int64_t> epochs;
  std::string text;  // corpus file or directory; "" = the `fortunes` package's cookie files
  int64_t layers = 6;
  int64_t width = 256;
  int64_t heads = 8;
  int64_t context = 128;
  double dropout = 0.0;
  bool tie_embeddings = true;
  // --activation-checkpointing: GPTConfig::activation_checkpointing (not with transformer-engine).
  bool activation_checkpointing = false;
  int64_t warmup_steps = 100;
  // Validation every this many optimizer steps within an epoch, at each epoch's end and after
  // the last step; unset: kDefaultEvalInterval. TrainOptions::val_check_interval (other than
  // its default "1.0") replaces it; giving both is an error.
  std::optional<int64_t> eval_interval;
  // Validation windows: eval_batches * batch_size (per rank under ddp), unless
  // TrainOptions::limit_val_batches / limit_test_batches say otherwise.
  int64_t eval_batches = 16;
  // Replaces TrainOptions::gradient_clip_val; unset: 1.0 (the GPT's clipping at norm 1).
  std::optional<double> gradient_clip_val;
  std::string sample_prompt = "The ";
  // Bytes of the final sample, at most kMaxSampleTokens. A signal (Ctrl-C, SIGTERM) during the
  // sample ends it: what was generated is kept and reported, the metrics JSON written, and
  // TrainingInterrupted thrown as for a signal during training.
  int64_t sample_tokens = 300;
  // A sample is for reading: a million bytes is some 300 pages of text, and with the default
  // GPT on a CPU already hours of generation (each byte a forward pass over the context), so a
  // larger --sample-tokens is almost always a typo of a few zeros; an error names the limit.
  static constexpr int64_t kMaxSampleTokens = 1'000'000;
  double temperature = 0.8;
  int64_t top_k = 40;
  // Write the trained model's state dict here (safetensors, keys "model.<name>"), e.g. to
  // fine-tune it later with --init-from.
  std::string save_weights;
};

// Uses from `o`: precision (and its fp8/quant settings), batch_size, lr (peak), weight_decay,
// optimizer, optim_bits_32, seed, threads, accumulate_grad_batches, gradient_clip_algorithm,
// limit_train_batches, limit_val_batches and limit_test_batches (not given:
// eval_batches batches each), val_check_interval, checkpoint_dir, resume, logger, log_dir,
// progress_bar, metrics_json, quiet; not the image models' hidden, vit_patch, vit_pool,
// train_subset, data_dir or lr_schedule (`mantissa train` warns when they are given);
// master_weights and stochastic_rounding are errors. Returns the metrics (val_loss_nats_per_char,
// tokens_per_second, the validation curve, the sample) and writes them to o.metrics_json when
// set. Before the corpus is read, a checkpoint_dir that holds an earlier run's files is refused
// as run_training refuses it (refuse_earlier_training_outputs, earlier_run_outputs.h).
TrainMetrics run_gpt_training(const TrainOptions& o, const GptOptions& g);

// The GPT that `g` describes, with parameters in `dtype` (what run_gpt_training builds).
models::GPTConfig gpt_config(const GptOptions& g, DType dtype);

// `mantissa eval --model gpt`: builds the GPT of `g` in o.precision, loads
// o.evaluate_checkpoint's weights (a checkpoint or a --save-weights file) and reports the loss
// over the whole validation text (val_loss_nats_per_char). Nothing is trained. The options are
// taken as they are; run_checkpoint_evaluation (checkpoint_evaluation.h) settles and checks
// them against the file first.
TrainMetrics run_gpt_evaluation(const TrainOptions& o, const GptOptions& g);

}  // namespace mantissa::recipes
