#include "finetune_command.h"

#include <fmt/format.h>

#include <memory>

#include "comma_list.h"
#include "distributed_options.h"
#include "fp8_options.h"
#include "mantissa/optim/optimizer_factory.h"
#include "mantissa/recipes/finetune_run.h"
#include "mantissa/recipes/trainer_flag_checks.h"
#include "mantissa/recipes/trainer_setup.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/trainer.h"
#include "non_negative.h"
#include "optimizer_options.h"
#include "quant_options.h"
#include "threads_option.h"
#include "trainer_loop_options.h"

namespace mantissa::app {

void add_finetune_command(CLI::App& app) {
  auto o = std::make_shared<recipes::TrainOptions>();
  auto f = std::make_shared<recipes::FinetuneOptions>();
  // Fine-tuning's usual settings: a small lr, no weight decay on adapters,
  // batches of 8.
  o->lr = 2e-4;
  o->weight_decay = 0;
  o->batch_size = 8;
  o->quant.lora_alpha = 32;
  auto targets = std::make_shared<std::string>();
  auto max_steps = std::make_shared<int64_t>(recipes::FinetuneOptions::kDefaultMaxSteps);
  auto epochs = std::make_shared<int64_t>(1);
  auto eval_interval = std::make_shared<int64_t>(50);
  CLI::App* cmd = app.add_subcommand("finetune",
                                     "Fine-tune a Hugging Face model directory (LoRA, QLoRA or "
                                     "full; docs/pretrained.md)");
  cmd->fallthrough();
  cmd->add_option("--model-dir", f->model_dir,
                  "Hugging Face model directory: config.json, "
                  "model.safetensors (or shards), "
                  "tokenizer.json")
      ->required();
  cmd->add_option("--data", f->data,
                  "Training data: .jsonl with \"text\" or "
                  "\"prompt\"/\"completion\" records "
                  "(completion tokens only in the loss), or plain text")
      ->required();
  cmd->add_option("--output-dir", f->output_dir,
                  "Where the result goes: peft adapter files with LoRA, else a "
                  "model directory")
      ->required();
  cmd->add_option("--adapter", f->adapter, "Start from this peft adapter directory");
  cmd->add_option("--merge-to", f->merge_to,
                  "Also write a model directory with the adapters merged into the weights");
  cmd->add_option("--block-size", f->block_size, "Tokens per training sequence")
      ->capture_default_str();
  cmd->add_option("--val-fraction", f->val_fraction,
                  "Share of the data's blocks held out for validation")
      ->capture_default_str();
  cmd->add_option("--precision", o->precision,
                  "Any training precision but 64-true: 32-true, bf16-mixed, 16-mixed, "
                  "bf16-true, 16-true, transformer-engine(-float16), or nf4, nf4-dq, fp4, "
                  "fp4-dq, int8, int8-training (quantized at load, with LoRA: QLoRA)")
      ->capture_default_str();
  add_fp8_options(cmd, &o->precision_options, Fp8ModuleNames::kHuggingFace);
  add_quant_options(*cmd, o->quant, /*training=*/false);
  cmd->add_option("--lora-dropout", o->quant.lora_dropout, "Dropout on the LoRA adapters' input")
      ->capture_default_str();
  cmd->add_option("--lora-targets", *targets,
                  "Comma-separated layer names that get adapters (peft's target_modules), "
                  "e.g. "
                  "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj; default: every "
                  "Linear")
      ->check(comma_list(lora_target_items()))
      ->check(lora_target_names());
  cmd->add_flag("--activation-checkpointing", f->activation_checkpointing,
                "Recompute each decoder layer in backward (less memory)");
  add_optimizer_options(*cmd, o->optimizer, o->optim_bits_32);
  cmd->add_option("--lr", o->lr, "Peak learning rate")->capture_default_str();
  cmd->add_option("--weight-decay", o->weight_decay, "Weight decay")->capture_default_str();
  cmd->add_option("--warmup-steps", f->warmup_steps, "Steps of linear learning-rate warm-up")
      ->capture_default_str();
  cmd->add_option("--batch-size", o->batch_size, "Sequences per batch")->capture_default_str();
  cmd->add_option("--max-steps", *max_steps,
                  "Stop after this many optimizer steps (default 100 unless --epochs)");
  cmd->add_option("--epochs", *epochs, "Passes over the training blocks");
  cmd->add_option("--eval-interval", *eval_interval, "Optimizer steps between validations")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of adapters' initialisation and shuffling")
      ->check(non_negative())
      ->capture_default_str();
  CLI::Option* threads_opt =
      cmd->add_option("--threads", o->threads, "Worker threads (default: all cores)");
  cmd->add_option("--metrics-json", o->metrics_json, "Write metrics to this JSON file");
  cmd->add_option("--memory-limit", o->memory_limit,
                  "Memory budget of each process's tensors (8GiB, 512MiB): a model that cannot "
                  "fit is refused before it loads, and a step beyond it stops with an "
                  "out-of-memory error");
  add_trainer_loop_options(*cmd, o);
  // Fine-tuning clips at 1.0 unless told otherwise (transformers' max_grad_norm), and its
  // evaluations read 16 batches unless told otherwise: the shared texts name train's defaults.
  cmd->get_option("--gradient-clip-val")
      ->description("Clip gradients to this norm or value (0: no clipping)")
      ->default_str("1");
  cmd->get_option("--limit-val-batches")
      ->description(
          "Batches per validation: a fraction (0.25) or a count (10); 0: no "
          "validation (default: 16)");
  cmd->get_option("--limit-test-batches")
      ->description(
          "Batches of the final evaluation after training: a fraction or a count; 0: "
          "none (default: 16)");
  add_distributed_options(*cmd, *o);
  cmd->add_flag_callback(
      "--no-average-tokens-across-ranks", [f] { f->average_tokens_across_ranks = false; },
      "ddp, zero1, zero2, fsdp: average each rank's loss over its own trained tokens and the "
      "ranks' gradients with equal weight (PyTorch DDP's), instead of over the trained tokens "
      "of every rank's batches (one all-reduce of the count a step; the gradient of one "
      "process with the whole batch)");
  cmd->callback([o, f, cmd, targets, max_steps, epochs, eval_interval, threads_opt] {
    check_threads_option(threads_opt, o->threads, "finetune");
    check_trainer_flags(*o, "finetune");
    auto given = [&](const char* flag) { return cmd->get_option(flag)->count() > 0; };
    if (given("--max-steps")) f->max_steps = *max_steps;
    if (given("--epochs")) f->epochs = *epochs;
    if (given("--eval-interval")) f->eval_interval = *eval_interval;
    if (given("--gradient-clip-val")) f->gradient_clip_val = o->gradient_clip_val;
    o->quant.lora_targets = optim::split_names(*targets);
    for (const char* flag : {"--lora-rank", "--lora-alpha", "--lora-dropout", "--lora-targets"})
      if (given(flag)) f->lora_flags_given.emplace_back(flag);
    recipes::check_finetune_options(*o, *f);
    start_distributed_run(*cmd, *o, "finetune");  // --devices N > 1: does not return
    const recipes::TrainMetrics m = recipes::run_finetune(*o, *f);
    fmt::print("{}", recipes::format_summary(m));
    if (!o->metrics_json.empty()) fmt::print("metrics written to {}\n", o->metrics_json);
  });
}

}  // namespace mantissa::app
