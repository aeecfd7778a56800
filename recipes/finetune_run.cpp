// `mantissa finetune`: a Hugging Face model directory fine-tuned on a data
// file.
#include "mantissa/recipes/finetune_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include <unistd.h>

#include "mantissa/core/allocator.h"
#include "mantissa/core/closest_names.h"
#include "mantissa/core/error.h"
#include "mantissa/core/terminal.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/core/warning.h"
#include "mantissa/data/dataloader.h"
#include "mantissa/data/token_blocks.h"
#include "mantissa/io/output_path.h"
#include "mantissa/kernels/kernel_paths.h"
#include "mantissa/models/causal_lm.h"
#include "mantissa/models/hf_config.h"
#include "mantissa/models/hf_loader.h"
#include "mantissa/models/language_model.h"
#include "mantissa/models/peft_adapter.h"
#include "mantissa/nn/lora.h"
#include "mantissa/optim/optimizer_factory.h"
#include "mantissa/recipes/checkpoint_metadata.h"
#include "mantissa/recipes/command_precision.h"
#include "mantissa/recipes/diverged_result.h"
#include "mantissa/recipes/earlier_run_outputs.h"
#include "mantissa/recipes/finetune_record.h"
#include "mantissa/recipes/finetuning.h"
#include "mantissa/recipes/hf_model_output.h"
#include "mantissa/recipes/init_from_check.h"
#include "mantissa/recipes/language_model_fit.h"
#include "mantissa/recipes/model_footprint.h"
#include "mantissa/recipes/multi_precision_flags.h"
#include "mantissa/recipes/precision_settings.h"
#include "mantissa/recipes/run_hparams.h"
#include "mantissa/recipes/thread_count.h"
#include "mantissa/recipes/trainer_flag_checks.h"
#include "mantissa/recipes/trainer_setup.h"
#include "mantissa/text/tokenizer.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"
#include "mantissa/train/signals.h"
#include "mantissa/train/trainer.h"

namespace mantissa::recipes {
namespace {

namespace fs = std::filesystem;
constexpr const char* kWhere = "finetune";
// The user's paths are quoted whole (escaped only) where a message gives them to pass again.
constexpr size_t kPathMaxBytes = 4096;
constexpr int64_t kDefaultEvalInterval = 50;

// Every training precision but 64-true: pretrained weights load as float32, bfloat16 or
// float16 (models/hf_loader.cpp), never float64.
std::vector<std::string> finetune_precisions() {
  std::vector<std::string> names = train::supported_precisions();
  std::erase(names, "64-true");
  return names;
}

// Whether `a` and `b` name one file or directory (io::same_or_inside both ways).
bool same_path(const std::string& a, const std::string& b) {
  return io::same_or_inside(a, b) && io::same_or_inside(b, a);
}

// A directory (or file) the run reads while, and after, it writes its outputs: --model-dir,
// --adapter, --data. `what` says what an output there would overwrite.
struct RunInput {
  const std::string& path;
  const char* flag;
  const char* what;   // "the model it fine-tunes"
  const char* place;  // "the model directory"
  bool directory;     // false: --data, a file (an output may not be it)
};

// Refuses output `path` of `flag` that is `input`, or, when `inside`, lies in it: the run would
// replace the files it reads (model.safetensors, config.json, adapter_config.json) with its own,
// whatever --overwrite-output-dir says.
void refuse_output_in_input(const std::string& path, const char* flag, bool inside,
                            const RunInput& input) {
  if (input.path.empty()) return;
  MANTISSA_CHECK(
      !(inside ? io::same_or_inside(path, input.path) : same_path(path, input.path)), kWhere,
      "{} {} is {}{} {}: the run would overwrite {}; give {} {}{} (--overwrite-output-dir does not "
      "allow this)",
      flag, quote_untrusted(path), inside ? "or lies inside " : "", input.flag,
      quote_untrusted(input.path), input.what, inside ? "a" : "another", flag,
      inside ? fmt::format(" outside {}", input.place) : std::string());
}

// --merge-to and --output-dir, the same directory or one inside the other, would mix the merged
// model's files with the adapter's: transformers would load the shared directory as the peft
// adapter, and each copy of one carries the other.
void check_merge_to_apart_from_output_dir(const FinetuneOptions& f) {
  MANTISSA_CHECK(!same_path(f.merge_to, f.output_dir), kWhere,
                 "--merge-to {} is --output-dir {}: the adapter and the merged model need a "
                 "directory each (transformers would load that directory as the adapter)",
                 quote_untrusted(f.merge_to), quote_untrusted(f.output_dir));
  const auto refuse_nested = [](const std::string& inner, const char* inner_flag,
                                const std::string& outer, const char* outer_flag) {
    MANTISSA_CHECK(!io::same_or_inside(inner, outer), kWhere,
                   "{} {} lies inside {} {}: the merged model's files and the adapter's would "
                   "mix; give --output-dir and --merge-to a directory each, neither inside the "
                   "other (--overwrite-output-dir does not allow this)",
                   inner_flag, quote_untrusted(inner, kPathMaxBytes), outer_flag,
                   quote_untrusted(outer, kPathMaxBytes));
  };
  refuse_nested(f.merge_to, "--merge-to", f.output_dir, "--output-dir");
  refuse_nested(f.output_dir, "--output-dir", f.merge_to, "--merge-to");
}

// The metrics JSON is written last, over whatever is at its path: not a file the run reads, nor
// an output directory or a file the run writes into one (the adapter's or model's files, a
// checkpoint).
void check_metrics_json_apart(const TrainOptions& o, const FinetuneOptions& f,
                              const std::vector<RunInput>& inputs) {
  if (o.metrics_json.empty()) return;
  for (const RunInput& input : inputs)
    refuse_output_in_input(o.metrics_json, "--metrics-json", input.directory, input);
  const fs::path metrics(o.metrics_json);
  const std::string name = metrics.filename().string();
  const std::string parent = metrics.has_parent_path() ? metrics.parent_path().string() : ".";
  for (const auto& [dir, flag] :
       {std::pair{f.output_dir, "--output-dir"}, std::pair{f.merge_to, "--merge-to"},
        std::pair{o.checkpoint_dir, "--checkpoint-dir"}}) {
    if (dir.empty()) continue;
    MANTISSA_CHECK(!same_path(o.metrics_json, dir), kWhere,
                   "--metrics-json {} is {} {}: give the metrics a file of their own",
                   quote_untrusted(o.metrics_json), flag, quote_untrusted(dir));
    MANTISSA_CHECK(!written_by_a_run(name) || !same_path(parent, dir), kWhere,
                   "--metrics-json {} is a file the run writes into {} {} ({}): give a "
                   "--metrics-json of another name or place (--overwrite-output-dir does not "
                   "allow this)",
                   quote_untrusted(o.metrics_json), flag, quote_untrusted(dir),
                   escape_untrusted(name));
  }
}

// The run writes its outputs while, and after, it reads the model directory and the adapter it
// starts from: an output there would replace their files (model.safetensors, config.json,
// adapter_config.json) with the run's, whatever --overwrite-output-dir says.
void check_outputs_apart_from_the_model(const TrainOptions& o, const FinetuneOptions& f) {
  const std::vector<RunInput> inputs = {
      {f.model_dir, "--model-dir", "the model it fine-tunes", "the model directory", true},
      {f.adapter, "--adapter", "the adapter it starts from", "the adapter directory", true},
      {f.data, "--data", "the data it trains on", "", false}};
  for (const RunInput& input : {inputs[0], inputs[1]}) {
    refuse_output_in_input(f.output_dir, "--output-dir", true, input);
    if (!f.merge_to.empty()) refuse_output_in_input(f.merge_to, "--merge-to", true, input);
    // Checkpoints in a directory of the model's own are fine; in the model directory itself
    // their config.json would replace the model's.
    if (!o.checkpoint_dir.empty())
      refuse_output_in_input(o.checkpoint_dir, "--checkpoint-dir", false, input);
  }
  if (!f.merge_to.empty()) check_merge_to_apart_from_output_dir(f);
  check_metrics_json_apart(o, f, inputs);
}

// The record of the run --resume continues (finetune_record.h), read before anything loads;
// a checkpoint no fine-tune wrote is refused, and so is a path where there is none (before the
// model loads and the data is tokenized, which may take minutes), and another --lora-alpha than
// the adapters trained with (`q`: the run's flags). nullopt without --resume, or for a sharded
// checkpoint (a directory, which the Trainer reads).
std::optional<FinetuneRecord> resumed_finetune(const std::string& resume, const FinetuneOptions& f,
                                               const QuantOptions& q) {
  if (resume.empty()) return std::nullopt;
  MANTISSA_CHECK(fs::exists(resume), kWhere,
                 "--resume {}: no such checkpoint; give a checkpoint a fine-tune wrote to its "
                 "--checkpoint-dir (such as last.safetensors)",
                 quote_untrusted(resume, kPathMaxBytes));
  if (!fs::is_regular_file(resume)) return std::nullopt;
  const io::SafetensorsHeader header = read_checkpoint_header_given_by(
      resume, "--resume",
      "a checkpoint a fine-tune wrote to its --checkpoint-dir (such as last.safetensors)");
  const nlohmann::json hparams = recorded_model_hparams(header, resume, kWhere);
  std::optional<FinetuneRecord> record = finetune_record(header, hparams);
  MANTISSA_CHECK(record.has_value(), kWhere,
                 "--resume {} is {}, not a fine-tune's: finetune continues only the checkpoints "
                 "of a `mantissa finetune` run (its --checkpoint-dir); give one of those, or "
                 "continue that run with the command that wrote it",
                 quote_untrusted(resume, kPathMaxBytes), describe_other_checkpoint(hparams));
  // Adapters on both sides or neither, their scaling and dropout, against the flags (an
  // --adapter's come from its adapter_config.json, which the flags cannot change).
  if (f.adapter.empty())
    check_resumed_lora(resume, header, hparams, q,
                       "to train adapters on its weights, start a new fine-tune with --lora-rank "
                       "from the model directory its run writes at the end (its --output-dir)");
  return record;
}

// The resumed run's model against this run's --model-dir: another architecture is refused (its
// weights fit none of this model's layers); another directory of the same architecture is
// named (the weights come from the checkpoint, the config and tokenizer from --model-dir).
void check_resumed_model(const FinetuneRecord& record, const models::HfConfig& config,
                         const std::string& resume, const std::string& model_dir) {
  if (!record.recorded) return;
  const std::string architecture = models::to_string(config.architecture);
  MANTISSA_CHECK(record.architecture == architecture, kWhere,
                 "--resume {} continues a fine-tune of a {} (--model-dir {}), but --model-dir "
                 "{} holds a {}: give the --model-dir of the run that wrote the checkpoint",
                 quote_untrusted(resume, kPathMaxBytes), escape_untrusted(record.architecture),
                 quote_untrusted(record.model_dir, kPathMaxBytes),
                 quote_untrusted(model_dir, kPathMaxBytes), architecture);
  if (!io::same_or_inside(model_dir, record.model_dir) ||
      !io::same_or_inside(record.model_dir, model_dir)) {
    warn(fmt::format(
        "--resume {} continues a fine-tune of --model-dir {}, and this run's is {} "
        "(a {} too): the weights come from the checkpoint, config.json and the "
        "tokenizer from {}",
        quote_untrusted(resume, kPathMaxBytes), quote_untrusted(record.model_dir, kPathMaxBytes),
        quote_untrusted(model_dir, kPathMaxBytes), architecture,
        quote_untrusted(model_dir, kPathMaxBytes)));
  }
}

// Before any rank writes there: an output directory that holds files of another run. `resumed`
// (the record of the run --resume continues) says which output directories are that run's.
void refuse_earlier_finetune_outputs(const TrainOptions& o, const FinetuneOptions& f,
                                     const std::optional<FinetuneRecord>& resumed) {
  const bool recorded = resumed && resumed->recorded;
  const auto own = [&](const std::string& dir) {
    return recorded ? std::optional<std::string>(dir) : std::nullopt;
  };
  std::vector<RunOutputDir> outputs = {{f.output_dir, "--output-dir", /*written_at_end=*/true,
                                        own(recorded ? resumed->output_dir : "")}};
  if (!f.merge_to.empty())
    outputs.push_back({f.merge_to, "--merge-to", true, own(recorded ? resumed->merge_to : "")});
  if (!o.checkpoint_dir.empty()) outputs.push_back({o.checkpoint_dir, "--checkpoint-dir"});
  refuse_earlier_run_outputs(outputs, o.resume, o.overwrite_output_dir, kWhere);
  refuse_earlier_metrics_json(o.metrics_json, !o.resume.empty(), o.overwrite_output_dir,
                              /*can_resume=*/true, kWhere);
}

// The LoRA flags set the adapters this run makes: without --lora-rank (a full fine-tune) there
// are none, and --adapter's come with their own settings (its adapter_config.json). A flag given
// there, at any value, would not be carried out.
void check_lora_flags_apply(const TrainOptions& o, const FinetuneOptions& f) {
  std::set<std::string> given(f.lora_flags_given.begin(), f.lora_flags_given.end());
  if (o.quant.lora_rank != 0) given.insert("--lora-rank");
  if (!o.quant.lora_targets.empty()) given.insert("--lora-targets");
  for (const char* flag : {"--lora-rank", "--lora-alpha", "--lora-dropout", "--lora-targets"}) {
    if (!given.contains(flag)) continue;
    MANTISSA_CHECK(f.adapter.empty(), kWhere,
                   "--adapter brings its own rank, alpha, dropout and targets (its "
                   "adapter_config.json): leave {} out",
                   flag);
    MANTISSA_CHECK(o.quant.lora_rank > 0 || std::string_view(flag) == "--lora-rank", kWhere,
                   "{} sets the LoRA adapters, and without --lora-rank (or --adapter) there are "
                   "none: this is a full fine-tune; give --lora-rank (16, say) to train "
                   "adapters, or leave {} out",
                   flag, flag);
  }
}

}  // namespace

void check_finetune_options(const TrainOptions& o, const FinetuneOptions& f) {
  command_precision(o.precision, finetune_precisions(), kWhere);
  MANTISSA_CHECK(!f.model_dir.empty(), kWhere, "--model-dir is required");
  // A file of the model directory given for it (its model.safetensors, config.json).
  MANTISSA_CHECK(!fs::is_regular_file(f.model_dir), kWhere,
                 "--model-dir {} is a file: --model-dir takes the directory that holds "
                 "config.json, model.safetensors and tokenizer.json (here, perhaps --model-dir "
                 "{})",
                 quote_untrusted(f.model_dir),
                 quote_untrusted(fs::path(f.model_dir).has_parent_path()
                                     ? fs::path(f.model_dir).parent_path().string()
                                     : std::string(".")));
  MANTISSA_CHECK(fs::is_directory(f.model_dir), kWhere,
                 "--model-dir {}: no such directory (a Hugging Face model directory: "
                 "config.json, model.safetensors, tokenizer.json)",
                 quote_untrusted(f.model_dir));
  MANTISSA_CHECK(!f.data.empty(), kWhere, "--data is required (a .jsonl or text file)");
  MANTISSA_CHECK(!f.output_dir.empty(), kWhere, "--output-dir is required");
  check_outputs_apart_from_the_model(o, f);
  MANTISSA_CHECK(o.batch_size >= 1, kWhere, "--batch-size must be at least 1, got {}",
                 o.batch_size);
  MANTISSA_CHECK(std::isfinite(o.lr) && o.lr > 0, kWhere, "--lr must be positive, got {}", o.lr);
  MANTISSA_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, kWhere,
                 "--weight-decay must be a finite number >= 0, got {}", o.weight_decay);
  MANTISSA_CHECK(f.block_size >= 1, kWhere, "--block-size must be at least 1, got {}",
                 f.block_size);
  MANTISSA_CHECK(f.val_fraction > 0 && f.val_fraction < 1, kWhere,
                 "--val-fraction must be in (0, 1), got {}", f.val_fraction);
  MANTISSA_CHECK(!f.max_steps || *f.max_steps >= 1 || (*f.max_steps == -1 && f.epochs), kWhere,
                 "--max-steps must be at least 1 (or -1 with --epochs), got {}",
                 f.max_steps.value_or(0));
  MANTISSA_CHECK(!f.epochs || *f.epochs >= 1, kWhere, "--epochs must be at least 1, got {}",
                 f.epochs.value_or(0));
  check_eval_interval(f.eval_interval, o, kWhere);  // as train's
  optim::check_optimizer_name(o.optimizer, kWhere);
  validate_quant_options(o.quant, kWhere);
  check_quant_dtype(o.quant, kWhere);
  check_quant_flags_apply(o.precision, o.quant, kWhere);
  check_lora_flags_apply(o, f);
  const bool lora = o.quant.lora_rank > 0 || !f.adapter.empty();
  MANTISSA_CHECK(!train::precision_traits(o.precision).quantized_weights || lora, kWhere,
                 "--precision {} fine-tunes through LoRA adapters only (QLoRA: the Linear "
                 "layers are quantized at load and the adapters train on them): give "
                 "--lora-rank 16, or --adapter DIR; a full fine-tune takes a float precision "
                 "such as 32-true or bf16-true",
                 o.precision);
  MANTISSA_CHECK(f.merge_to.empty() || lora, kWhere,
                 "--merge-to merges LoRA adapters: give --lora-rank or --adapter (a full "
                 "fine-tune's --output-dir is a model directory already)");
  // Before the model loads: the adapter is read after it.
  MANTISSA_CHECK(f.adapter.empty() || fs::is_directory(f.adapter), kWhere,
                 "--adapter {}: no such directory (a peft adapter directory holds "
                 "adapter_config.json and adapter_model.safetensors)",
                 quote_untrusted(f.adapter, kPathMaxBytes));
  if (f.activation_checkpointing)
    check_activation_checkpointing({o.precision}, o.precision_options, kWhere);
}

namespace {

// The tokenizer must encode into the embedding's rows.
void check_vocabulary(const text::Tokenizer& tok, const models::HfConfig& config,
                      const std::string& model_dir) {
  const fs::path dir(model_dir);
  MANTISSA_CHECK(tok.vocab_size() <= config.vocab_size, kWhere,
                 "{} holds {} tokens but {} gives vocab_size {} (the embedding's rows): "
                 "the "
                 "tokenizer does not belong to this model",
                 quote_untrusted((dir / "tokenizer.json").string()), tok.vocab_size(),
                 quote_untrusted((dir / "config.json").string()), config.vocab_size);
}

// GPT-2 learns one position embedding per position up to n_positions: a longer block has no
// row for its last positions. Rotary models (Llama, Qwen2) compute any position, but were
// trained up to max_position_embeddings, past which transformers warns too.
void check_block_size(int64_t block_size, const models::HfConfig& config) {
  if (config.max_position_embeddings <= 0 || block_size <= config.max_position_embeddings) return;
  MANTISSA_CHECK(config.architecture != models::HfArchitecture::kGpt2, kWhere,
                 "--block-size {} exceeds the model's n_positions {} (config.json): GPT-2 "
                 "has a learned position for each of those only; give --block-size {} or less",
                 block_size, config.max_position_embeddings, config.max_position_embeddings);
  warn(fmt::format(
      "--block-size {} exceeds the model's max_position_embeddings {} (config.json): it runs "
      "(rotary positions), but the model was not trained on positions that far",
      block_size, config.max_position_embeddings));
}

DType quant_compute_dtype(const QuantOptions& q) {
  if (q.quant_dtype == "fp16") return kFloat16;
  if (q.quant_dtype == "fp32") return kFloat32;
  return kBFloat16;
}

// Every --lora-targets name must match a layer that got adapters (peft's rule: a layer's whole
// name or its last dotted parts): one that matches none (a typo, another architecture's name)
// would leave the layers it meant without adapters, unnoticed.
void check_every_lora_target_matched(const nn::Module& model,
                                     const std::vector<std::string>& targets,
                                     const std::string& model_dir,
                                     const std::string& architecture) {
  std::vector<std::string> adapted, leaves;
  for (const auto& [name, m] : model.named_modules()) {
    if (dynamic_cast<const nn::LoRALinear*>(m) == nullptr) continue;
    adapted.push_back(name);
    const std::string leaf = name.substr(name.rfind('.') + 1);
    if (std::find(leaves.begin(), leaves.end(), leaf) == leaves.end()) leaves.push_back(leaf);
  }
  std::vector<std::string> unmatched;
  for (const std::string& t : targets) {
    const bool matched = std::any_of(adapted.begin(), adapted.end(), [&](const std::string& n) {
      return n == t || n.ends_with("." + t);
    });
    if (!matched) unmatched.push_back(quote_untrusted(t));
  }
  // Also the names of the Linear layers no target asked for: what the user may have meant.
  for (const auto& [name, m] : model.named_modules()) {
    const size_t dot = name.rfind('.');
    const std::string parent = dot == std::string::npos ? "" : name.substr(0, dot);
    if (!nn::linear_features(*m) || dynamic_cast<const nn::LoRALinear*>(m) != nullptr ||
        dynamic_cast<const nn::LoRALinear*>(&model.get_submodule(parent)) != nullptr)
      continue;
    const std::string leaf = name.substr(dot + 1);
    if (std::find(leaves.begin(), leaves.end(), leaf) == leaves.end()) leaves.push_back(leaf);
  }
  MANTISSA_CHECK(unmatched.empty(), kWhere,
                 "--lora-targets: {} {} no layer of --model-dir {} (a {}), so no layer would get "
                 "the adapters {} for; its Linear layers are named {} (a target matches a "
                 "layer's whole name or its last dotted parts, as peft's target_modules): "
                 "correct {} or leave {} out",
                 fmt::join(unmatched, ", "), unmatched.size() == 1 ? "matches" : "match",
                 quote_untrusted(model_dir, kPathMaxBytes), architecture,
                 unmatched.size() == 1 ? "it asks" : "they ask", fmt::join(leaves, ", "),
                 unmatched.size() == 1 ? "it" : "them", unmatched.size() == 1 ? "it" : "them");
}

// --fp8-exclude's names against the loaded model, before training: each must name one of its
// layers (a container keeps everything inside it out of FP8). A model with tied embeddings has
// no lm_head: its output layer is the input embedding, which never runs in FP8.
void check_fp8_exclude_matched(nn::Module& model, const TrainOptions& o,
                               const models::HfConfig& config, const std::string& model_dir) {
  if (!train::precision_traits(o.precision).fp8 || !o.precision_options.contains("fp8_exclude"))
    return;
  const train::Fp8ExcludeMatch match = train::match_fp8_exclude(
      model, train::transformer_engine_options_from(o.precision_options).exclude);
  if (!match.unmatched.empty()) {
    const std::string& e = match.unmatched.front();
    const bool tied_head =
        config.tie_word_embeddings && (e == "lm_head" || e.ends_with(".lm_head"));
    MANTISSA_CHECK(!tied_head, kWhere,
                   "--fp8-exclude names '{}', but --model-dir {} ties its output layer to the "
                   "input embedding (tie_word_embeddings in config.json), which never runs in "
                   "FP8: leave '{}' out",
                   escape_untrusted(e), quote_untrusted(model_dir, kPathMaxBytes),
                   escape_untrusted(e));
    fail(kWhere,
         "--fp8-exclude names '{}', which is no layer of --model-dir {} (a {}); closest names: "
         "{} (a name keeps that layer and everything inside it out of FP8)",
         escape_untrusted(e), quote_untrusted(model_dir, kPathMaxBytes),
         models::to_string(config.architecture), fmt::join(match.candidates(e), ", "));
  }
  MANTISSA_CHECK(match.idle.empty(), kWhere,
                 "--fp8-exclude names '{}', which holds no layer that runs in FP8 (the "
                 "embedding, the norms and LoRA's lora_A/lora_B stay in bf16): leave it out",
                 match.idle.empty() ? std::string() : escape_untrusted(match.idle.front()));
}

// Tokenization progress: on a terminal (stderr) a percentage rewritten in place; elsewhere, for
// a file of at least kLoggedProgressBytes, a line at every tenth.
constexpr int64_t kLoggedProgressBytes = 4 * data::kPlainTextPieceBytes;

data::TokenizeProgressFn progress_printer(const std::string& path, bool quiet) {
  if (quiet) return nullptr;
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto last_tenth = std::make_shared<int64_t>(0);
  return [path, tty, last_tenth](int64_t done, int64_t total) {
    const double percent =
        total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0;
    if (tty) {
      fmt::print(stderr, "\rtokenizing {}: {:.0f} %{}", escape_untrusted(path), percent,
                 done >= total ? "\n" : "");
    } else {
      const auto tenth = static_cast<int64_t>(percent / 10);
      if (total < kLoggedProgressBytes || tenth <= *last_tenth) return;
      *last_tenth = tenth;
      fmt::print(stderr, "tokenizing {}: {} %\n", escape_untrusted(path), tenth * 10);
    }
    std::fflush(stderr);
  };
}

}  // namespace

TrainMetrics run_finetune(const TrainOptions& o_in, const FinetuneOptions& f) {
  train::InterruptHandlers interrupt_handlers;
  check_finetune_options(o_in, f);
  TrainOptions o = o_in;
  // --resume last|best|PATH: the first two name files of --checkpoint-dir.
  if (!o.resume.empty()) o.resume = train::resolve_checkpoint_path(o.resume, o.checkpoint_dir);
  const std::optional<FinetuneRecord> resumed = resumed_finetune(o.resume, f, o.quant);
  refuse_earlier_finetune_outputs(o, f, resumed);
  const models::HfConfig config = models::load_hf_config(f.model_dir);
  if (resumed) check_resumed_model(*resumed, config, o.resume, f.model_dir);
  check_block_size(f.block_size, config);
  const text::Tokenizer tokenizer = text::Tokenizer::from_directory(f.model_dir);
  check_vocabulary(tokenizer, config, f.model_dir);
  // The output directories are made now (a path that cannot be written, or a file, fails
  // before the run) and taken back if the run ends before it writes them: by an error, or by a
  // signal during the set-up (ExitOnInterrupt).
  io::NewDirectoryCleanup output_dir_cleanup(f.output_dir), merge_to_cleanup(f.merge_to),
      checkpoint_dir_cleanup(o.checkpoint_dir);
  std::vector<std::string> made_dirs;
  for (const io::NewDirectoryCleanup* c :
       {&output_dir_cleanup, &merge_to_cleanup, &checkpoint_dir_cleanup}) {
    const std::vector<std::string> made = c->made();
    made_dirs.insert(made_dirs.end(), made.begin(), made.end());
  }
  io::prepare_output_dir(f.output_dir, "--output-dir");
  if (!f.merge_to.empty()) io::prepare_output_dir(f.merge_to, "--merge-to");
  if (!o.checkpoint_dir.empty()) io::prepare_output_dir(o.checkpoint_dir, "--checkpoint-dir");
  if (!o.metrics_json.empty()) io::check_output_file(o.metrics_json, "--metrics-json");

  // The data: tokenized once, split into training and validation blocks.
  std::optional<int64_t> eos = tokenizer.eos_id();
  if (!eos && !config.eos_token_ids.empty()) eos = config.eos_token_ids.front();
  std::optional<train::ExitOnInterrupt> tokenizing(std::in_place, "tokenizing the data", made_dirs);
  const auto stream = std::make_shared<data::TokenStream>(data::tokenize_file(
      f.data,
      [&tokenizer](std::string_view t, bool special) { return tokenizer.encode(t, special); },
      {.eos_id = eos, .progress = progress_printer(f.data, o.quiet)}));
  tokenizing.reset();
  const data::TokenBlockSplit split =
      data::split_blocks(stream, f.block_size, f.val_fraction, f.data);

  // A quantizing plugin keeps an untied head in full precision, as the loader
  // does.
  std::vector<std::string> keep = optim::split_names(o.quant.quant_ignore);
  if (!config.tie_word_embeddings) keep.push_back("lm_head");
  o.quant.quant_ignore = fmt::format("{}", fmt::join(keep, ","));

  const int64_t max_steps =
      f.max_steps.value_or(f.epochs ? int64_t{-1} : FinetuneOptions::kDefaultMaxSteps);
  const int64_t max_epochs = f.epochs.value_or(-1);
  train::TrainerOptions topts = make_trainer_options(o, kWhere);
  topts.max_steps = max_steps;
  topts.max_epochs = max_epochs;
  topts.gradient_clip_val = f.gradient_clip_val.value_or(1.0);
  topts.average_items_across_ranks = f.average_tokens_across_ranks;
  if (o.limit_val_batches.empty())
    topts.limit_val_batches = train::BatchLimit::batches(f.eval_batches);
  if (o.limit_test_batches.empty())
    topts.limit_test_batches = train::BatchLimit::batches(f.eval_batches);
  if (o.val_check_interval == TrainOptions{}.val_check_interval) {
    topts.val_check_interval = train::BatchLimit::batches(
        f.eval_interval.value_or(kDefaultEvalInterval) * o.accumulate_grad_batches);
  }
  data::DataLoader train_loader(split.train, o.batch_size, /*shuffle=*/true, o.seed + 1);
  data::DataLoader val_loader(split.val, o.batch_size);
  // A line after every validation, with or without the progress bar (--no-progress-bar).
  std::shared_ptr<ValidationPrinter> printer;
  if (!o.quiet) {
    printer = std::make_shared<ValidationPrinter>("nats/token", stdout_is_terminal());
    add_validation_printer(topts, printer);
  }
  auto fit_start = std::make_shared<FitStartStep>();
  topts.callbacks.push_back(fit_start);
  train::Trainer trainer(topts);
  log_run_hparams(trainer, finetune_run_hparams(o, f, trainer.options()));
  if (!f.average_tokens_across_ranks && trainer.strategy().world_size() == 1)
    warn_once(
        "--no-average-tokens-across-ranks has no effect on one process (its loss is the mean "
        "over the trained tokens of each step's batches either way)");
  const int64_t rank_batches = batches_per_rank(trainer, train_loader);
  check_batch_limits(trainer, train_loader, &val_loader);
  train::Precision& precision = trainer.precision_plugin();
  apply_thread_count(o.threads);
  if (computes_in_bf16(trainer)) warn_once_if_bf16_emulated();

  reset_peak_memory_stats();
  const int64_t baseline_bytes = memory_allocated();
  TrainMetrics m;
  // The model: quantized as it loads under a bitsandbytes mode, in the plugin's
  // dtype otherwise.
  const bool quantized = train::precision_traits(o.precision).quantized_weights;
  models::HfLoadOptions load{.dtype = quantized ? kFloat32 : precision.param_dtype(),
                             .activation_checkpointing = f.activation_checkpointing};
  if (quantized) {
    load.quantization = o.precision;
    load.quant_compute_dtype = quant_compute_dtype(o.quant);
    load.quant_ignore = keep;
  }
  // A config.json whose sizes no machine holds is refused with the figures before anything is
  // allocated (the weights files are read tensor by tensor as the model is built).
  const bool trains_base = o.quant.lora_rank == 0 && f.adapter.empty();
  const ModelFootprint footprint{
      .parameters = hf_parameter_count(config),
      .bits = per_rank_bits(parameter_bits(precision.precision(), load.dtype, o.optimizer,
                                           /*fp32_state=*/false, trains_base),
                            o.strategy),
      .precision = precision.precision(),
      .optimizer = o.optimizer};
  check_model_fits(footprint, memory_bound(o.memory_limit, trainer.device().is_cpu()),
                   fmt::format("'{}/config.json'", escape_untrusted(f.model_dir)),
                   trains_base ? "Train adapters on a quantized base instead (--precision "
                                 "nf4-dq --lora-rank 16), shard the training over ranks "
                                 "(--devices N --strategy fsdp), or allow more memory"
                               : "Allow more memory, or choose a smaller quantization "
                                 "(--precision nf4-dq)");
  announce_large_build(footprint, "finetune", o.quiet);
  std::optional<train::ExitOnInterrupt> loading(std::in_place, "loading the model", made_dirs);
  const std::shared_ptr<models::CausalLM> model = models::load_hf_model(f.model_dir, load);
  // Adapters: new ones on --lora-targets, or a peft directory's.
  QuantOptions q = o.quant;
  if (!f.adapter.empty()) q.lora_rank = 0;
  prepare_model_for_finetuning(*model, &precision, q, m,
                               /*training=*/f.adapter.empty());
  if (q.lora_rank > 0) {
    check_every_lora_target_matched(*model, q.lora_targets, f.model_dir,
                                    models::to_string(config.architecture));
  }
  models::PeftAdapterConfig adapter_config{
      .r = o.quant.lora_rank,
      .lora_alpha = o.quant.lora_alpha,
      .lora_dropout = o.quant.lora_dropout,
      .target_modules = o.quant.lora_targets,
      .fan_in_fan_out = config.architecture == models::HfArchitecture::kGpt2,
      .base_model_name_or_path = f.model_dir};
  if (!f.adapter.empty()) {
    const int64_t before_adapter = model->parameter_count();
    models::load_peft_adapter(*model, f.adapter);
    *m.total_parameters += model->parameter_count() - before_adapter;  // the adapter's count too
    const models::PeftAdapterConfig given = models::read_peft_adapter_config(f.adapter);
    adapter_config.r = given.r;
    adapter_config.lora_alpha = given.lora_alpha;
    adapter_config.lora_dropout = given.lora_dropout;
    adapter_config.target_modules = given.target_modules;
    adapter_config.target_regex = given.target_regex;
    for (const auto& [name, p] : model->named_parameters())
      if (name.find("base_layer.") != std::string::npos) Tensor(p).requires_grad_(false);
    m.trainable_parameters = nn::trainable_parameter_count(*model);
  }
  const bool lora = !nn::lora_state_dict(*model).empty();
  // As peft: with adapters only the adapters train (the output holds nothing else).
  if (lora) m.trainable_parameters = nn::mark_only_lora_as_trainable(*model);
  if (lora && adapter_config.target_modules.empty() && adapter_config.target_regex.empty()) {
    // Every Linear-like layer got an adapter: name their leaf names as peft's
    // targets.
    std::set<std::string> leaves;
    for (const auto& [name, m2] : model->named_modules())
      if (dynamic_cast<const nn::LoRALinear*>(m2) != nullptr)
        leaves.insert(name.substr(name.rfind('.') + 1));
    adapter_config.target_modules.assign(leaves.begin(), leaves.end());
  }
  check_fp8_exclude_matched(*model, o, config, f.model_dir);
  loading.reset();
  const int64_t build_peak_bytes = max_memory_allocated();
  reset_peak_memory_stats();

  // A frozen embedding (LoRA) has no optimizer state.
  const optim::OptimizerChoice choice = language_model_optimizer_choice(o, precision, !lora);
  const int64_t per_epoch =
      (topts.limit_train_batches.resolve(rank_batches, "--limit-train-batches", kWhere) +
       o.accumulate_grad_batches - 1) /
      o.accumulate_grad_batches;
  const int64_t total_steps =
      max_steps > 0 ? (max_epochs > 0 ? std::min(max_steps, per_epoch * max_epochs) : max_steps)
                    : std::max<int64_t>(per_epoch * max_epochs, 1);
  if (printer) printer->set_total_steps(total_steps);
  models::LanguageModel lm(
      std::shared_ptr<nn::Module>(model),
      {.lr = o.lr,
       .weight_decay = o.weight_decay,
       .warmup_steps = f.warmup_steps,
       .total_steps = total_steps,
       .make_optimizer = [choice](nn::Module& net) { return optim::make_optimizer(choice, net); },
       .token_weighted = true});

  // The checkpoints' record of this run: what finetune's --resume, train and eval tell it by.
  nlohmann::json hparams = finetune_hparams(models::to_string(config.architecture), f.model_dir,
                                            f.output_dir, f.merge_to);
  if (lora) {
    add_lora_hparams(hparams, adapter_config.r, adapter_config.lora_alpha,
                     adapter_config.lora_dropout);
  }
  lm.save_hyperparameters(hparams);
  m.precision = precision.precision();
  m.model = models::to_string(config.architecture);
  m.activation_checkpointing = f.activation_checkpointing;
  m.epochs = static_cast<int>(max_epochs);
  m.batch_size = o.batch_size;
  m.threads = omp_get_max_threads();
  m.seed = o.seed;
  // All of them (quantized weights by element, adapters included), as train's; the metrics'
  // trainable_parameters are those that train.
  m.parameters = m.total_parameters.value_or(model->parameter_count());
  m.trainable_parameters = m.trainable_parameters.value_or(nn::trainable_parameter_count(*model));
  if (!o.quiet) {
    fmt::print(
        "mantissa finetune: {} ({} layers, hidden {}, vocabulary {}), "
        "precision {}, optimizer {}, {}\n"
        "{}: {} data: {} tokens in {} documents; {} training / {} "
        "validation blocks of {} "
        "tokens; {} of {} parameters train{}\n",
        quote_untrusted(f.model_dir), config.num_hidden_layers, config.hidden_size,
        config.vocab_size, m.precision, choice.name, workers_text(trainer, m.threads),
        quote_untrusted(f.data), stream->completion_only ? "prompt/completion" : "text",
        stream->tokens.size(), stream->documents, split.train->size(), split.val->size(),
        f.block_size, *m.trainable_parameters, m.parameters,
        lora ? fmt::format(" (LoRA rank {})", adapter_config.r) : "");
    std::fflush(stdout);
  }

  const auto run_start = std::chrono::steady_clock::now();
  const FitOutcome fit =
      fit_language_model(trainer, lm, train_loader, val_loader, o, topts, *fit_start,
                         {.max_steps = max_steps,
                          .max_epochs = max_epochs,
                          .rank_batches = rank_batches,
                          .baseline_bytes = baseline_bytes,
                          .build_peak_bytes = build_peak_bytes},
                         m);
  // The trained model's files: peft adapters, or a model directory. A run stopped by a signal
  // writes them too, with the weights of the step it stopped at (a signal loses nothing, with
  // or without --checkpoint-dir); a second signal exits at once. fsdp: rank 0 reads the whole
  // model (gathered on every rank).
  const bool interrupted = trainer.interrupted();
  const std::string at_step =
      interrupted ? fmt::format(" of step {} (interrupted)", trainer.global_step()) : "";
  if (!fit.stopped()) {
    output_dir_cleanup.keep();
    merge_to_cleanup.keep();
    checkpoint_dir_cleanup.keep();
    trainer.strategy().unshard_module(lm);
  }
  if (!fit.stopped() && trainer.strategy().is_global_zero()) {
    if (lora) {
      models::save_peft_adapter(*model, adapter_config, f.output_dir);
      if (!f.merge_to.empty())
        write_merged_model_directory(f.model_dir, adapter_config, nn::lora_state_dict(*model),
                                     f.merge_to);
    } else {
      write_hf_model_directory(*model, f.model_dir, f.output_dir);
    }
    if (!o.quiet) {
      fmt::print("{}{} written to {}\n", lora ? "peft adapter" : "model directory", at_step,
                 escape_untrusted(f.output_dir));
      if (!f.merge_to.empty()) {
        fmt::print("merged model directory{} written to {}\n", at_step,
                   escape_untrusted(f.merge_to));
      }
    }
  }
  m.total_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  record_fit_end(trainer, *model, o.optimizer, {"validation", m.val_loss_nats_per_char}, m);
  if (interrupted && !fit.stopped()) {
    m.interrupted_weights_written_to.push_back(f.output_dir);
    if (lora && !f.merge_to.empty()) m.interrupted_weights_written_to.push_back(f.merge_to);
  }
  return finish_fit(trainer, fit, m, o.metrics_json);
}

}  // namespace mantissa::recipes
