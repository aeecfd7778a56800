#pragma once
// --init-from and --resume against what their file records (docs/qlora.md): the hyperparameters
// a checkpoint or --save-weights file stores (mantissa/recipes/model_hparams.h) checked against the
// run's flags before the model is built, so a GPT file of another head count, whose weights would
// load, is refused.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "mantissa/io/safetensors.h"
#include "mantissa/recipes/gpt_run.h"
#include "mantissa/recipes/image_run.h"

namespace mantissa::recipes {

// With --init-from: its file's recorded hyperparameters against the run's flags, by the rules
// eval applies to flags given with --checkpoint (mantissa/recipes/model_hparams.h): the model's
// shape must match, also what its tensors cannot show (a GPT's --heads, whose weights would load);
// an error names the flag and both values. `g` for --model gpt, ignored otherwise. Nothing
// without --init-from, or when the file is missing (the load says so).
void check_init_from(const TrainOptions& o, const GptOptions& g = {});

// The same for --resume: a checkpoint of another model or size is refused naming the flag to
// change (its restore would fail on the first state that differs, such as the LR schedulers).
// Then the adapters' and quantized layers' settings (docs/trainer.md, "What a resume may
// change"): another --lora-alpha is refused, another --lora-dropout or --quant-dtype is applied
// with a warning ("mantissa: warning: resuming: ...").
void check_resume(const TrainOptions& o, const GptOptions& g = {});

// The LoRA adapters' settings that checkpoint `path` records in `recorded` (its hyper_parameters:
// "lora-rank", "lora-alpha", "lora-dropout") against the resumed run's `q`. Adapters on one side
// only are refused, in every precision, naming the --lora-rank to resume with ("... holds LoRA
// adapters of rank 8 ...: resume with --lora-rank 8"; for a checkpoint without adapters,
// "resume without --lora-rank; " and `adapters_on_its_weights`, the command's way to train
// adapters on its weights). When both have adapters of the same rank: another --lora-alpha is
// refused (the saved adapters would add another multiple of what they learned: the model that
// goes on is not the one saved), another --lora-dropout is applied with a warning. check_resume
// does it for train; finetune for its own checkpoints.
void check_resumed_lora(const std::string& path, const io::SafetensorsHeader& header,
                        const nlohmann::json& recorded, const QuantOptions& q,
                        std::string_view adapters_on_its_weights);

// train::read_checkpoint_header(path) for the file a flag gave (--init-from, --resume, eval's
// --checkpoint). A file it cannot read (truncated, damaged, not a safetensors file) is refused
// as the flag's: "[FLAG] PATH is not a readable safetensors checkpoint (the loader's reason);
// pass WHAT_TO_PASS", not in the loader's words alone, which name neither the flag nor a fix.
io::SafetensorsHeader read_checkpoint_header_given_by(const std::string& path, const char* flag,
                                                      std::string_view what_to_pass);

// The start banner's line for --init-from `path`: "weights from 'PATH' (step 12 of the run that
// wrote it)", or "... (a --save-weights file: no step recorded)" for a file without the
// Trainer's state. "" when `path` is "". The file was checked before (check_init_from); a step
// that is not a whole number reads as not recorded.
std::string init_from_banner(const std::string& path);

}  // namespace mantissa::recipes
