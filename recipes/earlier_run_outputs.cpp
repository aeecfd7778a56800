// Refusing an output directory that holds an earlier run's files (see earlier_run_outputs.h).
#include "mantissa/recipes/earlier_run_outputs.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <string_view>

#include "mantissa/core/untrusted_text.h"
#include "mantissa/dist/communicator.h"
#include "mantissa/io/output_path.h"
#include "mantissa/io/stale_temporaries.h"
#include "mantissa/recipes/hf_model_output.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/rank_agreed_error.h"

namespace mantissa::recipes {
namespace {

namespace fs = std::filesystem;

constexpr size_t kNamedEntries = 4;
// The user's own paths are quoted whole (escaped only); the entries' names are file names.
constexpr size_t kPathMaxBytes = 4096;

// "a", "a and b", "a, b and c", "a, b, c, d and 7 more".
std::string entry_list(const std::vector<std::string>& names) {
  const size_t named = std::min(names.size(), kNamedEntries);
  std::string text;
  for (size_t i = 0; i < named; ++i) {
    if (i > 0) text += i + 1 == named && names.size() == named ? " and " : ", ";
    text += escape_untrusted(names[i]);
  }
  if (names.size() > named) text += fmt::format(" and {} more", names.size() - named);
  return text;
}

// Whether checkpoint `resume` lies in `dir` (its file, or its shard directory).
bool resumes_from_inside(const std::string& resume, const std::string& dir) {
  if (resume.empty()) return false;
  std::error_code ec;
  const fs::path d = fs::weakly_canonical(dir, ec);
  if (ec) return false;
  const fs::path r = fs::weakly_canonical(resume, ec);
  return !ec && (r.parent_path() == d || r == d);
}

// Why written_at_end directory `d`, which holds `names`, is not the output of the run that
// `resume` continues; "" when it is.
std::string not_the_resumed_runs(const RunOutputDir& d, const std::vector<std::string>& names,
                                 const std::string& resume) {
  const std::string path = quote_untrusted(d.path, kPathMaxBytes);
  const std::string resumed = quote_untrusted(resume, kPathMaxBytes);
  const std::string ways = fmt::format(
      "give a new or empty {}, or pass --overwrite-output-dir to write into it anyway", d.flag);
  // A --checkpoint-dir that is this directory too holds the resumed run's checkpoints.
  const bool checkpoints_here = resumes_from_inside(resume, d.path);
  std::vector<std::string> foreign;
  std::copy_if(names.begin(), names.end(), std::back_inserter(foreign), [&](const std::string& n) {
    return !written_by_finetune(n) && !(checkpoints_here && written_by_a_run(n));
  });
  if (!foreign.empty()) {
    return fmt::format(
        "{} {} holds {}, which `mantissa finetune` does not write there: it is not the output "
        "of the run --resume {} continues; {}",
        d.flag, path, entry_list(foreign), resumed, ways);
  }
  if (!d.resumed_run_dir) return "";
  const std::string& own = *d.resumed_run_dir;
  if (own.empty()) {
    return fmt::format(
        "{} {} holds {} from another run: the run --resume {} continues had no {}; {}", d.flag,
        path, entry_list(names), resumed, d.flag, ways);
  }
  if (io::same_or_inside(own, d.path) && io::same_or_inside(d.path, own)) return "";
  return fmt::format(
      "{} {} holds {} from another run: the run --resume {} continues wrote its {} to {}; give "
      "{} {}, a new or empty {}, or pass --overwrite-output-dir to write into it anyway",
      d.flag, path, entry_list(names), resumed, d.flag, quote_untrusted(own, kPathMaxBytes), d.flag,
      quote_untrusted(own, kPathMaxBytes), d.flag);
}

// The refusal for `d`, or "" when the run may write there.
std::string refusal(const RunOutputDir& d, const std::string& resume, bool overwrite) {
  // A temporary file of a write a killed run left (kill -9 during the final model's write) is
  // no earlier run's output: removed, and said so.
  io::remove_and_name_stale_safetensors_temporaries(d.path, "write");
  if (overwrite) return "";
  const std::vector<std::string> names = io::directory_entries(d.path);
  if (names.empty()) return "";
  if (d.written_at_end && !resume.empty()) return not_the_resumed_runs(d, names, resume);
  if (!d.written_at_end && resumes_from_inside(resume, d.path)) return "";
  // Other files (a README, notes): the directory is not empty, but no run of ours left them.
  if (std::none_of(names.begin(), names.end(), written_by_a_run)) {
    return fmt::format(
        "{} {} is not empty: it holds {}; give a new or empty "
        "{}, or pass --overwrite-output-dir to write into it anyway",
        d.flag, quote_untrusted(d.path, kPathMaxBytes), entry_list(names), d.flag);
  }
  const bool has_last = std::find(names.begin(), names.end(), "last.safetensors") != names.end();
  std::string resume_way;
  if (d.written_at_end) {
    resume_way =
        "continue the run that wrote them with --resume (a checkpoint of its "
        "--checkpoint-dir)";
  } else {
    resume_way = fmt::format("continue that run with --resume {}",
                             has_last ? "last" : "and one of its checkpoint files");
  }
  const std::string not_its_checkpoint =
      resume.empty() || d.written_at_end
          ? ""
          : fmt::format(" (--resume {} is not one of its checkpoints)",
                        quote_untrusted(resume, kPathMaxBytes));
  return fmt::format(
      "{} {} holds {} from an earlier run, which this run would overwrite{}; {}, give a new or "
      "empty {}, or pass --overwrite-output-dir to write into it anyway",
      d.flag, quote_untrusted(d.path, kPathMaxBytes), entry_list(names), not_its_checkpoint,
      resume_way, d.flag);
}

}  // namespace

bool written_by_a_run(const std::string& name) {
  const std::string_view n = name;
  return n.ends_with(".safetensors") || n.ends_with(".safetensors.index.json") ||
         written_by_finetune(name);
}

void refuse_earlier_run_outputs(const std::vector<RunOutputDir>& dirs, const std::string& resume,
                                bool overwrite, const char* where) {
  const std::shared_ptr<dist::Communicator> world = dist::world();
  std::string message;
  if (world->rank() == 0) {
    for (const RunOutputDir& d : dirs) {
      message = refusal(d, resume, overwrite);
      if (!message.empty()) break;
    }
  }
  if (world->world_size() > 1) message = world->broadcast(message, 0);
  if (!message.empty())
    throw train::RankAgreedError(fmt::format("[{}] {}", where, message), /*every_rank=*/true);
}

void refuse_earlier_metrics_json(const std::string& path, bool resuming, bool overwrite,
                                 bool can_resume, const char* where) {
  if (path.empty() || overwrite || resuming) return;
  const std::shared_ptr<dist::Communicator> world = dist::world();
  std::string message;
  if (world->rank() == 0) {
    std::error_code ec;
    // A regular file, or a symlink to one: its bytes would be replaced.
    const bool regular = fs::is_regular_file(path, ec);
    const uintmax_t bytes = regular ? fs::file_size(path, ec) : 0;
    if (regular && !ec && bytes > 0) {
      message = fmt::format(
          "--metrics-json {} already exists ({} bytes), and this run would replace it; give a "
          "new file{}, or pass --overwrite-output-dir to replace it",
          quote_untrusted(path, kPathMaxBytes), bytes,
          can_resume ? ", continue the run that wrote it with --resume" : "");
    }
  }
  if (world->world_size() > 1) message = world->broadcast(message, 0);
  if (!message.empty())
    throw train::RankAgreedError(fmt::format("[{}] {}", where, message), /*every_rank=*/true);
}

void refuse_earlier_training_outputs(const TrainOptions& o) {
  if (!o.checkpoint_dir.empty() && o.fast_dev_run == 0) {
    const std::string resume =
        o.resume.empty() ? "" : train::resolve_checkpoint_path(o.resume, o.checkpoint_dir);
    refuse_earlier_run_outputs({{o.checkpoint_dir, "--checkpoint-dir"}}, resume,
                               o.overwrite_output_dir, "train");
  }
  refuse_earlier_metrics_json(o.metrics_json, !o.resume.empty(), o.overwrite_output_dir,
                              /*can_resume=*/true, "train");
}

}  // namespace mantissa::recipes
