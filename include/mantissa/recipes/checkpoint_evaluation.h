#pragma once
// `mantissa eval` as a library call: what a checkpoint (or --save-weights file) says about
// itself, the options its evaluation takes from that record, the checks that its weights fit
// the options (precision, LoRA rank, --quant-ignore, the model), and the evaluation.
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "mantissa/recipes/gpt_run.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/recipes/init_from_check.h"
#include "mantissa/recipes/run_metrics.h"
#include "mantissa/recipes/tensor_sizes.h"

namespace mantissa::recipes {

// What eval needs to know of a checkpoint before it builds the model, from its header (the
// tensors are read once, by the load itself).
struct CheckpointFacts {
  // The precision it was saved in (its trainer metadata's "precision"), or the "precision"
  // entry of a --save-weights file; 32-true when a weights file records none, nullopt when a
  // checkpoint's trainer metadata does not say.
  std::optional<std::string> precision;
  // The rank of the LoRA adapters it holds (rows of its first lora_A weight), or 0.
  int64_t lora_rank = 0;
  // Whether it holds a GPT's token embedding (a GPT checkpoint or --save-weights file).
  bool gpt_weights = false;
  // What the model was built from (mantissa/recipes/model_hparams.h); {} for files written before
  // mantissa stored them.
  nlohmann::json hparams = nlohmann::json::object();
  // The FP8 recipe its trainer metadata records (precision_plugin's TransformerEnginePrecision
  // "recipe"), or null: what a file written before the hyperparameters held the fp8-* keys
  // says of its recipe.
  nlohmann::json fp8_recipe;
  // Its tensors' shapes, which the recorded sizes must agree with before a model is built.
  TensorShapes shapes;
};

// What eval needs to know of the checkpoint at `path`, read from its header (its recorded
// precision and quantized layers' dtype checked against its tensors); nullopt when there is no
// such file (the run reports it). An unreadable file, or a recorded precision this build does
// not know, throws naming --checkpoint.
std::optional<CheckpointFacts> read_checkpoint_facts(const std::string& path);

// Whether the caller chose an option itself, by its flag's name without dashes ("precision",
// "lora-rank", "model", "hidden", "fp8-format", ...): the command line's given flags. An
// option not given is taken from what the checkpoint records.
using OptionGiven = std::function<bool(const std::string& flag)>;

// Settles `o` and `g` for evaluating `checkpoint`: the model name and batch limit are checked;
// the options not given are taken from the file's record (model and sizes, precision, FP8
// recipe and exclusions, LoRA rank and alpha, --quant-ignore); then the file is checked against
// them: its weights are the model's (an image model or a gpt), its precision can be evaluated
// in o.precision (a quantized checkpoint only in its own; full-precision weights in a quantized
// or FP8 precision are converted on load through o.quant.init_from), its LoRA rank is
// o.quant.lora_rank, its quantized layers were kept by the same --quant-ignore, and the
// quantization flags apply to the precision. Sets o.evaluate_checkpoint. Throws, tagged
// "[eval]", naming the file and what to pass.
void settle_evaluation_options(const std::string& checkpoint, const OptionGiven& given,
                               TrainOptions& o, GptOptions& g);

// `mantissa eval`: an o.metrics_json file that exists and is not empty is refused before the
// checkpoint is read, unless o.overwrite_output_dir (refuse_earlier_metrics_json,
// earlier_run_outputs.h); then settle_evaluation_options, then run_gpt_evaluation (o.model
// "gpt"; a batch of 16 windows unless --batch-size is given; no --predictions) or
// run_evaluation. `given` defaults to nothing given: every option the file records is taken
// from it. `o` and `g` are left settled (what was evaluated).
TrainMetrics run_checkpoint_evaluation(
    const std::string& checkpoint, TrainOptions& o, GptOptions& g,
    const OptionGiven& given = [](const std::string&) { return false; });

}  // namespace mantissa::recipes
