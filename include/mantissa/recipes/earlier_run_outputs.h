#pragma once
// A run refuses, before any work, to write into an output directory that holds files of an
// earlier run (which it would overwrite one by one, leaving a mix of both), as Hugging Face's
// example scripts refuse a non-empty output_dir: unless it continues that run (--resume) or is
// told to write there anyway (--overwrite-output-dir). An empty directory is fine.
#include <optional>
#include <string>
#include <vector>

namespace mantissa::recipes {

// Whether `name` is a file a mantissa run writes into an output directory: checkpoints and
// weights (*.safetensors, sharded ones' index), train's config.json, and what a fine-tune
// writes (the model's and adapter's files, the tokenizer files copied beside a model).
bool written_by_a_run(const std::string& name);

// An output directory of a run and its flag ("--checkpoint-dir").
struct RunOutputDir {
  std::string path;
  std::string flag;
  // Fine-tuning's --output-dir and --merge-to, written at the end of the run whose checkpoint a
  // --resume continues: a --resume writes into one that holds files when it holds nothing but
  // files a fine-tune writes there (written_by_finetune, hf_model_output.h) and the resumed
  // checkpoint records it as its run's (resumed_run_dir). Otherwise (--checkpoint-dir) only a
  // --resume of a checkpoint inside it does.
  bool written_at_end = false;
  // For written_at_end: the directory the resumed checkpoint's run wrote for `flag` ("" when it
  // had none), as its record says (finetune_record.h); nullopt when there is no record (no
  // --resume, or a checkpoint of an older build: the files alone decide).
  std::optional<std::string> resumed_run_dir;
};

// Throws train::RankAgreedError tagged `where` ("train", "finetune") when one of `dirs` exists
// and holds anything (prepare_output_dir's momentary write probes aside) and neither
// `overwrite` nor `resume` (the resolved --resume, "" for none) lets the run write there. The
// message names the directory, up to four of its entries, and the ways out; it calls them an
// earlier run's only when one is a file a run writes (*.safetensors, config.json, the
// adapter's and tokenizer's files), else says the directory is not empty. A written_at_end
// directory that a --resume does not continue is named with the files a fine-tune does not
// write there, or with the directory the resumed run wrote. Under MPI every
// rank calls it: rank 0 looks and broadcasts its verdict before any rank writes there, so all
// ranks agree (also where they do not share the directory) and fail together.
void refuse_earlier_run_outputs(const std::vector<RunOutputDir>& dirs, const std::string& resume,
                                bool overwrite, const char* where);

// A metrics JSON file (--metrics-json) is an output as well: a run that would replace a non-empty
// file there (an earlier run's metrics, or anything else) is refused before any work, as a
// non-empty output directory is, unless `overwrite` (--overwrite-output-dir) or `resuming` (the
// run continues an earlier one with --resume, whose metrics file it rewrites). An empty file
// (made by mktemp) is no earlier run's. `can_resume` says whether the command has --resume
// (eval has not), for the ways out the message names. Under MPI rank 0 looks and broadcasts, as
// above. Throws train::RankAgreedError tagged `where`.
void refuse_earlier_metrics_json(const std::string& path, bool resuming, bool overwrite,
                                 bool can_resume, const char* where);

struct TrainOptions;

// The refusal of a training run of `mantissa train` (run_training and run_gpt_training call it
// before any work, so a C++ caller meets it as the command does): its --checkpoint-dir, unless
// it is a fast_dev_run (which writes no checkpoint), then its --metrics-json. o.resume may be
// "last" or "best" (of o.checkpoint_dir), as on the command line.
void refuse_earlier_training_outputs(const TrainOptions& o);

}  // namespace mantissa::recipes
