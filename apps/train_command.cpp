#include "train_command.h"

#include <fmt/format.h>

#include <functional>
#include <tuple>
#include <utility>

#include "comma_list.h"
#include "command_line_errors.h"
#include "distributed_launch.h"
#include "distributed_options.h"
#include "fp8_options.h"
#include "ignored_flags.h"
#include "json_config.h"
#include "mantissa/dist/communicator.h"
#include "mantissa/io/output_path.h"
#include "mantissa/recipes/earlier_run_outputs.h"
#include "mantissa/recipes/gpt_run.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/recipes/model_names.h"
#include "mantissa/recipes/multi_precision_flags.h"
#include "mantissa/recipes/thread_count.h"
#include "mantissa/recipes/train_run_checks.h"
#include "mantissa/recipes/trainer_flag_checks.h"
#include "mantissa/recipes/trainer_setup.h"
#include "mantissa/train/callback.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/trainer.h"
#include "non_negative.h"
#include "optimizer_options.h"
#include "quant_options.h"
#include "threads_option.h"
#include "trainer_loop_options.h"

namespace mantissa::app {

// The runs these commands start and what they report (recipes/).
using namespace recipes;
namespace {

// Runs `write` once, before the run's first training batch. Not at on_train_start: a run
// resumed from a checkpoint that is already at --max-steps or --epochs reaches that hook, trains
// nothing ("nothing to train") and must leave the config.json of the run behind the checkpoints
// as it was, so that `train --config DIR/config.json` still repeats that run. Every checkpoint
// this run saves comes after its first batch, so a checkpoint never lacks its config.
class WriteConfigAtFirstBatch : public train::Callback {
 public:
  explicit WriteConfigAtFirstBatch(std::function<void()> write) : write_(std::move(write)) {}
  void on_train_batch_start(train::Trainer&, train::TrainModule&, const data::Example&,
                            int64_t) override {
    if (write_) std::exchange(write_, nullptr)();
  }

 private:
  std::function<void()> write_;
};

// --model gpt: the flags whose image-model defaults do not fit the GPT are read only when
// given (mantissa/recipes/gpt_run.h), so a GPT run's config.json holds them only when they were
// given. (The image models' flags it ignores, --hidden, --patch, ..., are warned about and left out
// like every ignored flag: ignored_flags.h.)
const std::vector<std::string> kGptGivenOnlyFlags = {"batch-size", "max-steps", "epochs",
                                                     "gradient-clip-val", "eval-interval"};

void apply_gpt_flags(const CLI::App& cmd, TrainOptions& o, GptOptions& g, int64_t eval_interval) {
  auto given = [&](const char* flag) { return cmd.get_option(flag)->count() > 0; };
  if (!given("--batch-size")) o.batch_size = 16;
  if (given("--max-steps")) g.max_steps = o.max_steps;
  if (given("--epochs")) g.epochs = o.epochs;
  if (given("--gradient-clip-val")) g.gradient_clip_val = o.gradient_clip_val;
  if (given("--eval-interval")) g.eval_interval = eval_interval;
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto opts = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model: an image classifier (--model mlp, cnn, vit) on Fashion-MNIST, or a "
      "byte-level GPT (--model gpt) on a text corpus (--text)");
  // --config run.json belongs to the main app (CLI11 reads config files there); it falls
  // through from here and its keys land in this subcommand (json_config.h).
  cmd->fallthrough();
  cmd->add_option("--model", opts->model, "Model: mlp, cnn, vit or gpt")->capture_default_str();
  auto gpt = std::make_shared<GptOptions>();
  cmd->add_option("--patch", opts->vit_patch, "vit: patch size (4 or 7)")->capture_default_str();
  cmd->add_option("--pool", opts->vit_pool, "vit: cls or mean")->capture_default_str();
  cmd->add_option("--text", gpt->text,
                  "gpt: UTF-8 text file or directory (default: /usr/share/games/fortunes, "
                  "Debian package 'fortunes')");
  cmd->add_option("--sample-prompt", gpt->sample_prompt, "gpt: prompt of the final sample")
      ->capture_default_str();
  cmd->add_option("--sample-tokens", gpt->sample_tokens, "gpt: bytes to generate at the end")
      ->capture_default_str();
  auto eval_interval = std::make_shared<int64_t>(GptOptions::kDefaultEvalInterval);
  cmd->add_option("--eval-interval", *eval_interval,
                  "gpt: optimizer steps between validations (or --val-check-interval)")
      ->capture_default_str();
  cmd->add_option("--warmup-steps", gpt->warmup_steps,
                  "gpt: steps of linear learning-rate warm-up before the cosine decay")
      ->capture_default_str();
  cmd->add_option("--precision", opts->precision,
                  train::supported_precisions_text() + " (`mantissa info` describes each)")
      ->capture_default_str();
  cmd->add_option("--accelerator", opts->accelerator,
                  "cpu, gpu (or cuda: the first CUDA GPU) or auto (the GPU when one can be used "
                  "and the precision runs there); `mantissa info` shows which precision runs "
                  "where, docs/cuda.md what runs on a GPU")
      ->capture_default_str();
  cmd->add_option("--memory-limit", opts->memory_limit,
                  "Memory budget of the training (8GiB, 512MiB): beyond it the run stops with an "
                  "out-of-memory error; the data set is not counted (`mantissa plan` finds the "
                  "largest batch that fits)");
  cmd->add_option(
         "--float32-matmul-precision", opts->float32_matmul_precision,
         "highest (fp32), high (bf16x3, about fp32 accuracy) or medium (one bf16 "
         "product) for float32 matmuls and convolutions; medium is faster only with AVX-512 BF16 "
         "or AMX, high costs about what highest does there and more elsewhere")
      ->capture_default_str();
  cmd->add_option("--amp-backend", opts->amp_backend,
                  "native (default) or apex: Apex's optimisation levels with --precision 16-mixed "
                  "(deprecated, as in Lightning)")
      ->capture_default_str();
  cmd->add_option("--amp-level", opts->amp_level,
                  "apex: O0 (fp32), O1 (autocast + dynamic scaling), O2 (fp16 weights, fp32 "
                  "masters and BatchNorm; default), O3 (pure fp16)");
  cmd->add_option("--amp-loss-scale", opts->amp_loss_scale,
                  "apex: 'dynamic' or a static scale such as 128 (default: O1/O2 dynamic, "
                  "O0/O3 none)");
  add_fp8_options(cmd, &opts->precision_options);
  add_quant_options(*cmd, opts->quant);
  cmd->add_option("--save-weights", gpt->save_weights,
                  "gpt: write the trained model's weights to this .safetensors file");
  cmd->add_option("--layers", gpt->layers, "gpt: transformer blocks")->capture_default_str();
  cmd->add_option("--width", gpt->width, "gpt: embedding width")->capture_default_str();
  cmd->add_option("--heads", gpt->heads, "gpt: attention heads")->capture_default_str();
  cmd->add_option("--context", gpt->context, "gpt: context length in bytes")->capture_default_str();
  cmd->add_flag(
      "--activation-checkpointing", gpt->activation_checkpointing,
      "gpt: keep only each block's input until backward, which runs the block again (less memory "
      "for about one more forward per step; Hugging Face's gradient_checkpointing)");
  cmd->add_option("--epochs", opts->epochs, "Passes over the training set")->capture_default_str();
  cmd->add_option("--batch-size", opts->batch_size, "Samples per step (gpt: default 16)");
  add_optimizer_options(*cmd, opts->optimizer, opts->optim_bits_32);
  cmd->add_option("--lr", opts->lr, "Learning rate")->capture_default_str();
  cmd->add_option("--lr-schedule", opts->lr_schedule,
                  "constant; cosine (decay to 0 over the run's optimizer steps); onecycle (up "
                  "from lr/25 to --lr and down, over the run); plateau (lr/10 after 2 epochs "
                  "without a better test loss)")
      ->capture_default_str();
  cmd->add_option("--weight-decay", opts->weight_decay,
                  "Weight decay (decoupled for adamw and the 8-bit optimizers, L2 for adam, sgd)")
      ->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Seed for initialisation and shuffling")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--hidden", opts->hidden, "Hidden sizes, comma separated (e.g. 1024,1024)")
      ->check(comma_list(hidden_size_items()))
      ->capture_default_str();
  CLI::Option* threads_opt =
      cmd->add_option("--threads", opts->threads, "Worker threads (default: all cores)");
  cmd->add_option("--train-subset", opts->train_subset,
                  "Train on the first N training images only (quick runs)");
  cmd->add_flag("--master-weights", opts->master_weights,
                "16-true/bf16-true: keep fp32 master weights in the optimizer");
  cmd->add_flag("--stochastic-rounding", opts->stochastic_rounding,
                "16-true/bf16-true: round the half-precision weight update stochastically");
  cmd->add_option("--metrics-json", opts->metrics_json, "Write metrics to this JSON file");
  cmd->add_option("--data-dir", opts->data_dir,
                  "Fashion-MNIST directory (default: $MANTISSA_DATA_DIR, then "
                  "/usr/share/datasets/fashion-mnist)");
  cmd->add_option("--max-steps", opts->max_steps,
                  "Stop after this many optimizer steps (-1: none; gpt: 2000 unless --epochs)")
      ->capture_default_str();
  cmd->add_option("--min-epochs", opts->min_epochs,
                  "Early stopping cannot end the run before this many epochs (0: no minimum)")
      ->capture_default_str();
  cmd->add_option("--min-steps", opts->min_steps,
                  "Early stopping cannot end the run before this many optimizer steps (0: no "
                  "minimum)")
      ->capture_default_str();
  cmd->add_option("--max-time", opts->max_time,
                  "Stop after this much training time, DD:HH:MM:SS (00:12:00:00: 12 hours), "
                  "at the next optimizer step, saving last.safetensors with --checkpoint-dir");
  add_trainer_loop_options(*cmd, opts);
  cmd->add_option("--fast-dev-run", opts->fast_dev_run,
                  "Smoke test: N batches of training and validation, no checkpoints or logs");
  cmd->add_option("--overfit-batches", opts->overfit_batches,
                  "Train on the same first batches every epoch (0.25 or 10)");
  cmd->add_option("--check-val-every-n-epoch", opts->check_val_every_n_epoch,
                  "Validate after every N-th epoch")
      ->capture_default_str();
  cmd->add_flag("--lr-find", opts->lr_find,
                "Run the learning-rate range test instead of training: the lr rises over "
                "--lr-find-steps steps across --lr-find-range, and the lr where the loss falls "
                "fastest is suggested (docs/cli.md)");
  cmd->add_option("--lr-find-range", opts->lr_find_range,
                  "MIN,MAX: the first and last lr of --lr-find's sweep")
      ->default_val("1e-8,1");
  cmd->add_option("--lr-find-steps", opts->lr_find_steps, "Optimizer steps of --lr-find's sweep")
      ->default_val(100);
  cmd->add_option("--lr-find-plot", opts->lr_find_plot,
                  "Write --lr-find's losses over the lr as an SVG chart to this file");
  cmd->add_flag("--detect-anomaly", opts->detect_anomaly,
                "Stop at the first op whose output or gradient is NaN/inf, naming the op, its "
                "inputs and the layer; under 16-mixed, log skipped steps and scale changes");
  cmd->add_flag("--cuda-graphs", opts->cuda_graphs,
                "On a GPU, replay each batch's forward and backward as one CUDA graph (--model "
                "gpt; docs/cuda.md)");
  cmd->add_option("--num-sanity-val-steps", opts->num_sanity_val_steps,
                  "Validation batches run before training (-1: all)")
      ->capture_default_str();
  add_distributed_options(*cmd, *opts);
  cmd->add_flag("--sync-batchnorm", opts->sync_batchnorm,
                "ddp: batch-norm statistics over the global batch instead of each rank's");
  cmd->callback([opts, gpt, eval_interval, cmd, threads_opt] {
    check_model_name(opts->model, "train");  // before the warnings that name the model
    // In the flags' names, before anything uses them (the run sets the matmul precision before
    // it builds the Trainer's options, which check them again).
    check_trainer_flags(*opts, "train");
    opts->quant.quant_ignore = quant_ignore_for_model(opts->quant.quant_ignore, opts->model);
    check_threads_option(threads_opt, opts->threads, "train");
    // Flags this run ignores (another model's, a disabled feature's): say so.
    warn_ignored_flags(*cmd, *opts);
    start_distributed_run(*cmd, *opts, "train");  // --devices N > 1: does not return
    // Before any work, for every model: a run must not fail at its very end.
    if (cmd->get_option("--metrics-json")->count() > 0 && dist::world()->is_global_zero()) {
      io::check_output_file(opts->metrics_json, "--metrics-json");  // "" is an error too
    }
    if (cmd->get_option("--lr-find-plot")->count() > 0 && opts->lr_find &&
        dist::world()->is_global_zero()) {
      io::check_output_file(opts->lr_find_plot, "--lr-find-plot");
    }
    // A run's config.json held every flag's default, "quant-dtype": "bf16" among them: from
    // --config, a default value is not a given flag (on the command line any value is).
    for (auto [flag, given, is_default] :
         {std::tuple{"--quant-dtype", &opts->quant.quant_dtype_given,
                     opts->quant.quant_dtype == QuantOptions{}.quant_dtype},
          std::tuple{"--quant-ignore", &opts->quant.quant_ignore_given,
                     opts->quant.quant_ignore.empty()}}) {
      if (is_default && !given_on_command_line(flag, recorded_command_line())) *given = false;
    }
    check_quant_flags_apply(opts->precision, opts->quant, "train");
    check_train_run(*opts, *gpt, cmd->get_option("--init-from")->count() > 0);
    if (opts->model == "gpt") apply_gpt_flags(*cmd, *opts, *gpt, *eval_interval);
    // --resume last|best|PATH: the first two name files of --checkpoint-dir.
    if (!opts->resume.empty()) {
      opts->resume = train::resolve_checkpoint_path(opts->resume, opts->checkpoint_dir);
    }
    // The library's refusals (run_training and run_gpt_training make them too), here before the
    // --checkpoint-dir is made below: a refused run leaves no new directory.
    recipes::refuse_earlier_training_outputs(*opts);
    // The resolved flags beside the checkpoints, so a run can be repeated (LightningCLI's
    // config.yaml).
    // (A fast_dev_run keeps nothing, not even that.)
    // Written when the first batch trains, so a run refused before it trains (a resume that does
    // not fit, a missing --text) or one with nothing left to train (resumed at --max-steps or
    // --epochs) leaves the directory's config.json, that of the run behind its checkpoints, as
    // it was.
    if (!opts->checkpoint_dir.empty() && opts->fast_dev_run == 0) {
      io::prepare_output_dir(opts->checkpoint_dir, "--checkpoint-dir");
      if (dist::world()->is_global_zero()) {  // one writer under ddp
        std::vector<std::string> given_only = ignored_flag_names(*opts);
        // Given with a precision that quantizes nothing they are errors (above): left out.
        if (!train::precision_traits(opts->precision).quantized_weights)
          given_only.push_back("quant-dtype");
        std::vector<std::pair<std::string, std::string>> extra;
        if (opts->model == "gpt") {
          given_only.insert(given_only.end(), kGptGivenOnlyFlags.begin(), kGptGivenOnlyFlags.end());
          extra = {{"batch-size", std::to_string(opts->batch_size)}};
        }
        // The file the run resumed from, not "last" or "best": those name whatever the
        // directory holds when the record is read, so the record would not say what happened.
        if (!opts->resume.empty()) extra.emplace_back("resume", opts->resume);
        // --devices auto is held as -1, which a replay of this file would refuse as a count.
        if (opts->devices == -1 && cmd->get_option("--devices")->count() > 0)
          extra.emplace_back("devices", "auto");
        opts->callbacks.push_back(std::make_shared<WriteConfigAtFirstBatch>(
            [cmd, path = opts->checkpoint_dir + "/config.json", given_only, extra] {
              write_resolved_config(*cmd, path, given_only, extra);
            }));
      }
    }
    TrainMetrics m;
    try {
      m = opts->model == "gpt" ? run_gpt_training(*opts, *gpt) : run_training(*opts);
    } catch (const train::TrainingDiverged&) {
      // Stopped in a step: the run wrote its metrics JSON before passing the error on (exit
      // status 4, main.cpp).
      if (!opts->metrics_json.empty()) fmt::print("metrics written to {}\n", opts->metrics_json);
      throw;
    } catch (const train::CheckpointSaveFailed&) {
      // --checkpoint-dir could not take a checkpoint: the same (exit status 2).
      if (!opts->metrics_json.empty()) fmt::print("metrics written to {}\n", opts->metrics_json);
      throw;
    }
    // A range test printed its own report (recipes/lr_find_run.cpp): it trained nothing to sum up.
    if (!opts->lr_find) fmt::print("{}", format_summary(m));
    if (!opts->metrics_json.empty()) fmt::print("metrics written to {}\n", opts->metrics_json);
    // After everything it writes: the run's outputs are kept, the exit status says they are no
    // result (4, main.cpp).
    // Every rank found it (the final evaluation's metrics are the job's, the same everywhere).
    if (!m.diverged.empty())
      throw train::TrainingDiverged::on_every_rank(fmt::format("[train] {}", m.diverged));
  });
}

}  // namespace mantissa::app
