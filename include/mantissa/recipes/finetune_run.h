#pragma once
// `mantissa finetune`: a Hugging Face model directory (config.json, safetensors weights,
// tokenizer.json) fine-tuned on a data file with the library's Trainer (docs/pretrained.md):
//
//   QLoRA          --precision nf4-dq --lora-rank 16: the weights are quantized as they load
//                  (models::load_hf_model), LoRA adapters on --lora-targets train; the output
//                  directory receives peft's adapter files (models/peft_adapter.h)
//   LoRA           --lora-rank with 32-true, bf16-mixed, bf16-true, transformer-engine
//   full           --lora-rank 0 in 32-true, bf16-mixed, bf16-true or transformer-engine: every
//                  weight trains; the output directory is a model directory (config.json,
//                  model.safetensors in the source dtype, the tokenizer files)
//
// The data (data/token_blocks.h): plain text packed into --block-size blocks, or JSONL with
// "text" or "prompt"/"completion" records (completion tokens only in the loss); the last
// --val-fraction of the blocks validate (val_loss in nats per token, val_ppl). Every Trainer
// option of `mantissa train` applies as for the GPT (checkpoints, exact --resume, accumulation,
// clipping, loggers, metrics JSON).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mantissa/recipes/image_run.h"
#include "mantissa/recipes/run_metrics.h"

namespace mantissa::recipes {

struct FinetuneOptions {
  static constexpr int64_t kDefaultMaxSteps = 100;
  std::string model_dir;   // config.json, weights, tokenizer.json
  std::string data;        // .jsonl or plain text
  std::string output_dir;  // adapters (LoRA) or a model directory (full fine-tuning)
  std::string adapter;     // a peft adapter directory to start from (its rank and targets)
  std::string merge_to;    // also write the model with the adapters merged here
  int64_t block_size = 256;
  double val_fraction = 0.1;
  // Neither set: kDefaultMaxSteps. As GptOptions::max_steps / epochs otherwise.
  std::optional<int64_t> max_steps;
  std::optional<int64_t> epochs;
  int64_t warmup_steps = 10;
  std::optional<int64_t> eval_interval;  // optimizer steps between validations; unset: 50
  int64_t eval_batches = 16;
  std::optional<double> gradient_clip_val;  // unset: 1.0
  bool activation_checkpointing = false;
  // A step's loss is the mean over every trained token of its batches (LanguageModelOptions::
  // token_weighted); under several ranks true counts the tokens of every rank's batches
  // (TrainerOptions::average_items_across_ranks), false each rank's own
  // (--no-average-tokens-across-ranks).
  bool average_tokens_across_ranks = true;
  // The LoRA flags given on the command line ("--lora-alpha"; also --lora-rank, --lora-dropout,
  // --lora-targets): refused at any value where they set nothing (a full fine-tune, or --adapter,
  // whose adapter_config.json sets them). A non-zero lora_rank and non-empty lora_targets count
  // as given.
  std::vector<std::string> lora_flags_given;
};

// Refuses, in the command's flags' words, options run_finetune cannot run: a missing model
// directory or output, sizes and rates out of range, an unknown optimizer, quantized weights
// without adapters, --merge-to without adapters. run_finetune calls it first; the command calls
// it before it starts any rank.
void check_finetune_options(const TrainOptions& o, const FinetuneOptions& f);

// Uses from `o`: precision (a bitsandbytes mode quantizes at load), quant (lora_rank,
// lora_alpha, lora_dropout, lora_targets, quant_dtype, quant_ignore), batch_size, lr,
// weight_decay, optimizer, optim_bits_32, seed, threads, accumulate_grad_batches,
// gradient_clip_algorithm, limit_*_batches, val_check_interval, checkpoint_dir, resume, logger,
// log_dir, progress_bar, metrics_json, quiet; resume may be "last" or "best" (of checkpoint_dir).
// Before anything loads it refuses, as `mantissa finetune` does, the outputs that
// check_finetune_options refuses and an output_dir, merge_to or checkpoint_dir that holds an
// earlier run's files (earlier_run_outputs.h). Throws mantissa::Error naming the file for a bad
// model directory, data file or adapter, and when the tokenizer's vocabulary exceeds the
// embedding's rows (naming tokenizer.json and config.json).
TrainMetrics run_finetune(const TrainOptions& o, const FinetuneOptions& f);

}  // namespace mantissa::recipes
