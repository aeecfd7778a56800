#pragma once
// 4-/8-bit weights and LoRA for a run (docs/quantization.md): the options `train`, `compare`
// and `bench` share, the bitsandbytes plugin they select, and the one function that turns a
// freshly built model into the model to fine-tune (load --init-from, quantize, add adapters,
// freeze).
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mantissa/nn/module.h"
#include "mantissa/recipes/run_metrics.h"
#include "mantissa/train/precision.h"

namespace mantissa::recipes {

struct QuantOptions {
  int64_t lora_rank = 0;             // 0: no adapters
  double lora_alpha = 16;            // scaling alpha / r
  double lora_dropout = 0;           // on the adapters' input
  std::string quant_ignore;          // comma-separated name prefixes of Linears to keep
  std::string quant_dtype = "bf16";  // compute dtype of the quantized layers: bf16, fp16, fp32
  std::string init_from;             // safetensors checkpoint to start from (then quantize)
  // Names of the layers that get adapters, matched as peft's target_modules ("q_proj" matches
  // "model.layers.0.self_attn.q_proj"); empty: every Linear-like layer.
  std::vector<std::string> lora_targets;
  // Whether --quant-dtype / --quant-ignore were given (whatever their value): with a precision
  // that quantizes nothing either is an error (multi_precision_flags.h), "bf16" too.
  bool quant_dtype_given = false;
  bool quant_ignore_given = false;
};

// For the commands that take a list of precisions (bench, compare, plan): `canonical[i]` is
// `given[i]` normalized; a precision given twice (also through an alias) throws naming it and
// both spellings as typed ("precision 'bf16-mixed' is listed twice: 'bf16' and
// 'bf16-mixed'"). `command` names the command in the message.
void check_no_precision_twice(const std::vector<std::string>& given,
                              const std::vector<std::string>& canonical, const char* command);

// Throws for a --quant-dtype other than bf16, fp16 or fp32 (naming a likely meant one), labelled
// with `where`, the command that was run.
void check_quant_dtype(const QuantOptions& q, const char* where);

// The quantizing plugin of a precision whose weights are quantized (the precision registry's
// plugin, made with --quant-dtype and --quant-ignore), nullptr for any other precision. Throws
// for a bad --quant-dtype.
std::shared_ptr<train::Precision> make_quant_plugin(const std::string& precision,
                                                    const QuantOptions& q);

// --quant-ignore's names are relative to the bare model the quantizing plugin converts ("2" for
// the MLP's last layer); the image models' TrainModule holds that model as "net", so the model
// summary, --fp8-exclude and --optim-bits-32 spell it "net.2". For --model mlp/cnn/vit a leading
// "net." is dropped from each name, so both spellings mean the same layer (and are recorded
// alike); the GPT's names are the same in both places. `names`: comma separated.
std::string quant_ignore_for_model(const std::string& names, const std::string& model);

// Checks the LoRA options (--lora-rank 0 means none; negative ranks and bad alpha/dropout
// throw naming the flag, tagged with `command`: "[train] --lora-alpha ...", "[eval] ...").
void validate_quant_options(const QuantOptions& q, const std::string& command = "train");

// Whether the model may be built inside the plugin's init scope: not when --init-from gives
// full-precision weights to load first.
bool build_in_init_scope(const QuantOptions& q);

// After the model is built: loads --init-from (a checkpoint of the same model and shape; its
// "model." prefixed entries or a plain state dict), converts it with the plugin when it is
// the quantizing one (convert_module again at setup is a no-op), wraps the Linear-like layers
// in LoRA adapters when --lora-rank > 0 and then trains only adapters, biases and the layers
// neither quantized nor wrapped. Fills the metrics' parameter counts. `training`: false for an
// evaluation, which skips the warnings about what would train.
void prepare_model_for_finetuning(nn::Module& model, train::Precision* plugin,
                                  const QuantOptions& q, TrainMetrics& m, bool training = true);

// compare and bench: checks --quant-ignore against the bare model `make_model` builds, as the
// first quantized precision of `precisions` (canonical names) would convert it, so that a name
// that starts no layer, or a list that keeps every Linear, is an error before any precision
// trains rather than after the runs before it.
void check_quant_ignore_names(const std::vector<std::string>& precisions, const QuantOptions& q,
                              const std::function<std::shared_ptr<nn::Module>()>& make_model);

// With --lora-rank the wrapped weights are frozen and only the adapters learn on top of them:
// without --init-from, or a --resume whose checkpoint holds them, those weights are the model's
// random initialisation and the run fine-tunes nothing. Warns once saying so, in every
// precision (`model`: the name the warning gives the model, e.g. "GPT" or "mlp").
void warn_if_adapting_random_weights(const std::string& precision, const QuantOptions& q,
                                     bool resuming, const std::string& model);

}  // namespace mantissa::recipes
