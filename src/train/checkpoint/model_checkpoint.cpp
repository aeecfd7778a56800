#include "mantissa/train/checkpoint/model_checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/core/warning.h"
#include "mantissa/io/output_path.h"
#include "mantissa/io/stale_temporaries.h"
#include "mantissa/io/untrusted_json.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/trainer.h"
#include "train/checkpoint/checkpoint_filename.h"

namespace mantissa::train {
namespace {

// Paths read from a checkpoint are untrusted, and best_k_models' are deleted when a better
// checkpoint arrives: each must be a .safetensors file under dirpath, with no "..".
bool is_own_checkpoint_path(const std::string& path, const std::string& dirpath) {
  if (path.empty()) return true;
  const std::filesystem::path p(path);
  if (p.extension() != ".safetensors" || path.rfind(dirpath + "/", 0) != 0) return false;
  for (const auto& part : p)
    if (part == "..") return false;
  return true;
}

// Whether the checkpoint a fit resumed from lies in `dir` ("": a new run, which does not).
bool resumes_from(const std::string& ckpt_path, const std::string& dir) {
  if (ckpt_path.empty()) return false;
  const std::filesystem::path parent = std::filesystem::path(ckpt_path).parent_path();
  std::error_code ec_parent, ec_dir;
  const auto a = std::filesystem::weakly_canonical(parent.empty() ? "." : parent, ec_parent);
  const auto b = std::filesystem::weakly_canonical(dir, ec_dir);
  return !ec_parent && !ec_dir && a == b;
}

// Whether `path` is the checkpoint a fit resumed from (`ckpt_path`, "" for a new run): their
// canonical paths are equal, as resumes_from compares directories, so "ckpt/./a.safetensors"
// and an absolute path name the same file.
bool is_resumed_from(const std::string& path, const std::string& ckpt_path) {
  if (ckpt_path.empty() || path.empty()) return false;
  std::error_code ec_path, ec_ckpt;
  const auto a = std::filesystem::weakly_canonical(path, ec_path);
  const auto b = std::filesystem::weakly_canonical(ckpt_path, ec_ckpt);
  return !ec_path && !ec_ckpt && a == b;
}

// JSON has no inf or NaN (nlohmann writes null, which read back as a number throws "corrupt
// callback state" on resume): a non-finite score is written as the string "inf", "-inf" or
// "nan".
nlohmann::json score_to_json(double score) {
  if (std::isfinite(score)) return score;
  return std::isnan(score) ? "nan" : (score > 0 ? "inf" : "-inf");
}

// A score as score_to_json wrote it; null (a non-finite score written by an earlier version)
// is `unknown`.
double score_from_json(const nlohmann::json& j, double unknown) {
  if (j.is_null()) return unknown;
  if (j.is_string()) {
    const std::string& v = j.get_ref<const std::string&>();
    if (v == "inf") return INFINITY;
    if (v == "-inf") return -INFINITY;
    if (v == "nan") return NAN;
    fail("ModelCheckpoint", "corrupt callback state in checkpoint: score {} is not a number",
         quote_untrusted(v));
  }
  return j.get<double>();
}

}  // namespace

ModelCheckpoint::ModelCheckpoint(ModelCheckpointOptions options) : options_(std::move(options)) {
  MANTISSA_CHECK(options_.mode == "min" || options_.mode == "max", "ModelCheckpoint",
                 "mode must be 'min' or 'max', got '{}'", options_.mode);
  MANTISSA_CHECK(options_.save_top_k >= -1, "ModelCheckpoint",
                 "save_top_k must be -1, 0 or positive, got {}", options_.save_top_k);
  MANTISSA_CHECK(options_.every_n_epochs >= 1, "ModelCheckpoint",
                 "every_n_epochs must be at least 1, got {}", options_.every_n_epochs);
  MANTISSA_CHECK(options_.every_n_train_steps >= 0, "ModelCheckpoint",
                 "every_n_train_steps must be >= 0, got {}", options_.every_n_train_steps);
  MANTISSA_CHECK(!options_.dirpath.empty(), "ModelCheckpoint", "dirpath must not be empty");
  // Lightning's `if not filename` takes None and "" for its default; kept as "", the files were
  // the hidden "<dirpath>/.safetensors", then "-v1.safetensors".
  if (options_.filename.empty()) options_.filename = kDefaultCheckpointFilename;
  // Its files stay inside dirpath: it deletes the ones it no longer keeps, and a resumed run
  // refuses paths outside it (a damaged or hostile checkpoint could name any file).
  const std::filesystem::path filename(options_.filename);
  bool escapes = filename.is_absolute();
  for (const auto& part : filename) escapes = escapes || part == "..";
  MANTISSA_CHECK(!escapes, "ModelCheckpoint",
                 "filename '{}' would put checkpoints outside dirpath '{}': give a name (it may "
                 "hold subfolders) without '..' or a leading '/', and choose the folder with "
                 "dirpath",
                 options_.filename, options_.dirpath);
  check_checkpoint_filename(options_.filename);  // braces and specs; the keys at the first save
}

std::string ModelCheckpoint::state_key() const {
  return fmt::format("ModelCheckpoint{{monitor={}, mode={}, dirpath={}}}",
                     options_.monitor.value_or(""), options_.mode, options_.dirpath);
}

void ModelCheckpoint::on_fit_start(Trainer& trainer, TrainModule&) {
  last_step_saved_ = -1;  // global steps count from the start (or the checkpoint) again
  // The step the fit starts at (a resumed run's is the checkpoint's) was saved already, if it
  // was due: with gradient accumulation the resumed run's first batches leave the step there,
  // and every_n_train_steps wrote it again from inside the window (a versioned copy, and a
  // last.safetensors that could not be resumed).
  last_step_seen_ = trainer.global_step();
  io::prepare_output_dir(options_.dirpath, "ModelCheckpoint dirpath");
  if (!trainer.strategy().is_global_zero()) return;  // rank 0 alone owns the files
  io::remove_and_name_stale_safetensors_temporaries(options_.dirpath, "checkpoint save");
  // As Lightning warns of a checkpoint directory that is not empty: a new run, or one resumed
  // from a checkpoint kept elsewhere, writes over an earlier run's last.safetensors (and,
  // without the version counter, its checkpoints of the same names), e.g. when a run's
  // config.json is replayed as it is. A run resumed from this directory continues its own.
  if (!resumes_from(trainer.ckpt_path(), options_.dirpath)) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(options_.dirpath, ec)) {
      if (entry.path().extension() != ".safetensors") continue;
      warn(fmt::format(
          "checkpoint directory {} already holds checkpoints of an earlier run (such as {}); this "
          "run's {}. Give another directory to keep them apart, or resume from {} to continue "
          "that run",
          quote_untrusted(options_.dirpath, 4096),
          quote_untrusted(entry.path().filename().string(), 4096),
          !options_.enable_version_counter ? "checkpoints of the same names replace them"
          : options_.save_last
              ? "last.safetensors replaces theirs, and its other checkpoints whose names are "
                "taken get a version (-v1, -v2, ...)"
              : "checkpoints whose names are taken get a version (-v1, -v2, ...)",
          quote_untrusted(std::filesystem::exists(options_.dirpath + "/last.safetensors")
                              ? options_.dirpath + "/last.safetensors"
                              : entry.path().string(),
                          4096)));
      break;
    }
  }
}

bool ModelCheckpoint::better(double a, double b) const {
  return options_.mode == "min" ? a < b : a > b;
}

bool ModelCheckpoint::file_exists(Trainer& trainer, const std::string& path) const {
  std::vector<double> found = {
      trainer.strategy().is_global_zero() && std::filesystem::exists(path) ? 1.0 : 0.0};
  trainer.strategy().sum_over_ranks(found);
  return found[0] > 0;
}

std::string ModelCheckpoint::format_name(Trainer& trainer, const std::string& replaced) const {
  const std::string name =
      format_checkpoint_filename(options_.filename, trainer.current_epoch(), trainer.global_step(),
                                 trainer.callback_metrics());
  auto path_of = [&](const std::string& n) { return options_.dirpath + "/" + n + ".safetensors"; };
  std::string path = path_of(name);
  if (!options_.enable_version_counter) {
    // Lightning writes over a taken name here, the file its run resumed from included (its
    // _should_remove_checkpoint only keeps that file from being deleted). That file is what
    // the run can be resumed from again, and what its config.json's "resume" names: it is not
    // written over but versioned (name-v1, then written over there), as with the counter.
    const std::string& resumed = trainer.ckpt_path();
    if (!is_resumed_from(path, resumed)) return path;
    for (int64_t version = 1; is_resumed_from(path, resumed); ++version)
      path = path_of(versioned_checkpoint_filename(name, version));
    warn_once(fmt::format(
        "ModelCheckpoint(enable_version_counter=False): the checkpoint named {} is written to {} "
        "instead: {} is the checkpoint this run resumed from, which is never written over",
        quote_untrusted(name), quote_untrusted(std::filesystem::path(path).filename().string()),
        quote_untrusted(resumed)));
    return path;
  }
  // A name without {step} repeats within an epoch (val_check_interval, every_n_train_steps):
  // the later checkpoint wrote over the earlier, which the kept set still listed, so a top-k
  // file could hold other weights than its score, or vanish. As Lightning's, a taken name gets
  // a version; only the file this checkpoint replaces may be written over. A kept file counts
  // as taken even if it is gone from the disk, so two entries never share a path.
  auto taken = [&](const std::string& p) {
    return p != replaced && (best_k_models_.count(p) > 0 || file_exists(trainer, p));
  };
  for (int64_t version = 1; taken(path); ++version) {
    path = path_of(versioned_checkpoint_filename(name, version));
  }
  return path;
}

void ModelCheckpoint::on_train_epoch_end(Trainer& trainer, TrainModule&) {
  if (options_.every_n_train_steps > 0) return;
  if ((trainer.current_epoch() + 1) % options_.every_n_epochs != 0) return;
  // Saved already at this step, after a validation inside the epoch that should_stop ended
  // right after (Lightning saves once per global step).
  if (trainer.global_step() == last_step_saved_) return;
  // An epoch that check_val_every_n_epoch leaves without validation has no score of its own
  // weights (Lightning saves after the validations then): last.safetensors only.
  save(trainer, /*top_k=*/!(options_.monitor && trainer.epoch_skips_validation()));
}

void ModelCheckpoint::on_validation_end(Trainer& trainer, TrainModule&) {
  // Lightning checks a ModelCheckpoint after every validation when an epoch validates more
  // than once, so a validation inside the epoch can give the best checkpoint. The validation
  // after the epoch's last batch is saved in on_train_epoch_end, at the same step, after the
  // module's hooks.
  if (!trainer.validating_mid_epoch() || trainer.global_step() == last_step_saved_) return;
  const bool top_k = options_.every_n_train_steps == 0 &&
                     (trainer.current_epoch() + 1) % options_.every_n_epochs == 0;
  save(trainer, top_k);
}

void ModelCheckpoint::on_train_batch_end(Trainer& trainer, TrainModule&, const Tensor&,
                                         const data::Example&, int64_t) {
  const int64_t step = trainer.global_step();
  if (options_.every_n_train_steps <= 0 || step == last_step_seen_) return;
  last_step_seen_ = step;  // an accumulating batch leaves the step as it was
  if (step <= 0 || step % options_.every_n_train_steps != 0) return;
  if (options_.monitor && options_.save_top_k != 0 && !trainer.has_validated() &&
      trainer.callback_metrics().count(*options_.monitor) == 0) {
    // A step before the fit's first validation cannot have a validation metric yet: as
    // Lightning, warn and keep no top-k checkpoint of it (last.safetensors is still written).
    warn_once(fmt::format(
        "ModelCheckpoint(monitor='{}'): the step checkpoints before the fit's first validation "
        "have no '{}' to rank them by, so they are not kept (last.safetensors is written); "
        "ranked checkpoints start with the first validation",
        *options_.monitor, *options_.monitor));
    save(trainer, /*top_k=*/false);
    return;
  }
  save(trainer);
}

void ModelCheckpoint::write(Trainer& trainer, const std::string& path) {
  // The directory was checked writable at fit start; it may have been removed, replaced by a
  // file or made read-only since, or its disk filled. The writer's error names the file only
  // (or, from create_directories, a filesystem_error), and the caller could not tell a failed
  // save from any other error, so it would lose the run's metrics and name no flag.
  std::string reason;
  try {
    std::filesystem::create_directories(options_.dirpath);
    trainer.save_checkpoint(path);
  } catch (const Error& e) {
    reason = e.what();
  } catch (const std::filesystem::filesystem_error& e) {
    reason = e.what();
  }
  // Under ddp rank 0 writes for every rank: had it stopped alone, the others would have waited
  // for it in their next collective and the job was aborted with no metrics. The ranks agree on
  // the writer's error first (one collective per checkpoint) and all stop together.
  reason = trainer.strategy().first_message_over_ranks(reason, nullptr);
  if (reason.empty()) return;
  throw CheckpointSaveFailed(
      fmt::format("[ModelCheckpoint] could not write the checkpoint {} into the checkpoint "
                  "directory {} ({}); make it a writable directory with room for the checkpoints",
                  quote_untrusted(path, 4096), quote_untrusted(options_.dirpath, 4096), reason),
      path, options_.dirpath, reason, /*every_rank=*/true);
}

void ModelCheckpoint::save(Trainer& trainer, bool top_k) {
  if (options_.save_top_k != 0 && top_k) save_top_k(trainer);
  if (options_.save_last) {
    last_model_path_ = options_.dirpath + "/last.safetensors";
    write(trainer, last_model_path_);
  }
  last_step_saved_ = trainer.global_step();
}

void ModelCheckpoint::save_top_k(Trainer& trainer) {
  double score = static_cast<double>(trainer.global_step());
  if (options_.monitor) {
    const auto& metrics = trainer.callback_metrics();
    auto it = metrics.find(*options_.monitor);
    if (it == metrics.end()) {
      std::vector<std::string> keys;
      for (const auto& kv : metrics) keys.push_back(kv.first);
      fail("ModelCheckpoint",
           "`ModelCheckpoint(monitor='{}')` could not find the monitored key in the returned "
           "metrics: [{}]. HINT: Did you call `log('{}', value)` in the TrainModule?",
           *options_.monitor, fmt::join(keys, ", "), *options_.monitor);
    }
    // A NaN ranks last, as in Lightning (which saves it as +/-inf): compared as NaN it
    // was never worse than anything, so it stayed the best checkpoint and was never removed.
    score = std::isnan(it->second) ? (options_.mode == "min" ? INFINITY : -INFINITY) : it->second;
  }
  // The kept checkpoint that goes first to make room: the worst score, or without a monitor
  // the oldest step.
  auto worst_kept = [&] {
    auto worst = best_k_models_.begin();
    for (auto i = best_k_models_.begin(); i != best_k_models_.end(); ++i) {
      const bool worse =
          options_.monitor ? better(worst->second, i->second) : i->second < worst->second;
      if (worse) worst = i;
    }
    return worst;
  };
  std::string replaced;  // the kept file this one pushes out ("" while the set has room)
  if (options_.save_top_k > 0 &&
      static_cast<int64_t>(best_k_models_.size()) >= options_.save_top_k) {
    const auto worst = worst_kept();
    // Replace the worst kept checkpoint only when this one is better.
    if (options_.monitor && !better(score, worst->second)) return;
    replaced = worst->first;
  }
  // The checkpoint this run resumed from is not removed, as in Lightning (whose
  // _should_remove_checkpoint keeps it): if the resumed run fails, it is still there to resume
  // from again. Pushed out of the top k, it leaves the kept set like any other file but stays
  // on the disk, untracked, so later checkpoints push out others. The checkpoint that pushes it
  // out does not take its name but gets a version (Lightning's may take it and write over the
  // file); enable_version_counter false writes over a taken name, but not this one (format_name).
  const std::string& resumed = trainer.ckpt_path();
  if (is_resumed_from(replaced, resumed)) replaced.clear();
  // After the monitor's check: a monitor never logged is reported as such, not as a key of
  // the filename.
  const std::string path = format_name(trainer, replaced);
  // The state is updated before the file is written, as Lightning's: the file holds the kept
  // set with itself in it, so a run resumed from it (the best checkpoint, one written inside
  // an epoch) ranks and removes files as the unbroken run does. It came without itself, and
  // the resumed run kept reporting the previous best.
  const auto kept_before = best_k_models_;
  const std::string best_path_before = best_model_path_;
  const std::optional<double> best_score_before = best_model_score_;
  best_k_models_[path] = score;
  // Without a monitor the newest is "best" (the score is the step).
  if (!best_model_score_ || !options_.monitor || better(score, *best_model_score_)) {
    best_model_score_ = score;
    best_model_path_ = path;
  }
  std::vector<std::string> dropped;
  while (options_.save_top_k > 0 &&
         static_cast<int64_t>(best_k_models_.size()) > options_.save_top_k) {
    const auto worst = worst_kept();
    if (worst->first != path && !is_resumed_from(worst->first, resumed)) {
      dropped.push_back(worst->first);
    }
    best_k_models_.erase(worst);
  }
  try {
    write(trainer, path);
  } catch (...) {
    best_k_models_ = kept_before;
    best_model_path_ = best_path_before;
    best_model_score_ = best_score_before;
    throw;
  }
  if (trainer.strategy().is_global_zero()) {
    for (const std::string& old : dropped) remove_checkpoint_file(old);
  }
}

void ModelCheckpoint::on_train_interrupted(Trainer& trainer, TrainModule& module) {
  last_model_path_ = options_.dirpath + "/last.safetensors";
  write(trainer, last_model_path_);
}

nlohmann::json ModelCheckpoint::state_dict() const {
  nlohmann::json j;
  j["monitor"] = options_.monitor ? nlohmann::json(*options_.monitor) : nlohmann::json(nullptr);
  j["mode"] = options_.mode;
  j["dirpath"] = options_.dirpath;
  j["best_model_path"] = best_model_path_;
  j["best_model_score"] =
      best_model_score_ ? score_to_json(*best_model_score_) : nlohmann::json(nullptr);
  j["last_model_path"] = last_model_path_;
  nlohmann::json kept = nlohmann::json::object();
  for (const auto& [path, score] : best_k_models_) kept[path] = score_to_json(score);
  j["best_k_models"] = kept;
  return j;
}

void ModelCheckpoint::load_state_dict(const nlohmann::json& state) {
  try {
    // Paths only carry over when the checkpoint was written to the same directory.
    if (state.at("dirpath").get<std::string>() != options_.dirpath) return;
    best_model_path_ = state.at("best_model_path").get<std::string>();
    best_model_score_.reset();
    if (!state.at("best_model_score").is_null()) {
      best_model_score_ = score_from_json(state.at("best_model_score"), NAN);
    }
    last_model_path_ = state.at("last_model_path").get<std::string>();
    // A null score (written by an earlier version for a NaN or inf) ranks last.
    const double worst = options_.mode == "min" ? INFINITY : -INFINITY;
    const nlohmann::json& kept = state.at("best_k_models");
    MANTISSA_CHECK(kept.is_object(), "ModelCheckpoint",
                   "corrupt callback state in checkpoint: best_k_models is not an object");
    best_k_models_.clear();
    for (const auto& [path, score] : kept.items()) {
      best_k_models_[path] = score_from_json(score, worst);
    }
    std::vector<std::string> paths{best_model_path_, last_model_path_};
    for (const auto& kv : best_k_models_) paths.push_back(kv.first);
    for (const std::string& path : paths) {
      MANTISSA_CHECK(is_own_checkpoint_path(path, options_.dirpath), "ModelCheckpoint",
                     "corrupt callback state in checkpoint: path {} is not a .safetensors file "
                     "in dirpath '{}'",
                     quote_untrusted(path), options_.dirpath);
    }
  } catch (const nlohmann::json::exception& e) {
    fail("ModelCheckpoint", "corrupt callback state in checkpoint: {}", e.what());
  }
}

std::string resolve_checkpoint_path(const std::string& spec, const std::string& dirpath) {
  if (spec != "last" && spec != "best") return spec;
  MANTISSA_CHECK(!dirpath.empty(), "resume",
                 "'{}' names a checkpoint of the checkpoint directory; give --checkpoint-dir too",
                 spec);
  const std::string last = dirpath + "/last.safetensors";
  MANTISSA_CHECK(std::filesystem::is_regular_file(last), "resume",
                 "no {} to resume '{}' from; train with --checkpoint-dir {} first, or give a "
                 "checkpoint file",
                 last, spec, dirpath);
  if (spec == "last") return last;
  // The best path is part of the ModelCheckpoint state saved with the last checkpoint.
  const CheckpointContents contents = load_checkpoint_file(last);
  std::string best;
  const auto entry = contents.metadata.find(kCheckpointMetadataKey);
  MANTISSA_CHECK(entry != contents.metadata.end(), "resume",
                 "{} is not a mantissa checkpoint (no trainer metadata)", last);
  try {
    const std::string& text = entry->second;
    io::check_json_nesting(text, "resume", last + ": the trainer metadata");
    const auto meta = nlohmann::json::parse(text);
    for (const auto& [key, state] : meta.at("callbacks").items()) {
      if (key.rfind("ModelCheckpoint{", 0) == 0 && state.contains("best_model_path") &&
          state.at("best_model_path").is_string() && !state.at("monitor").is_null()) {
        best = state.at("best_model_path").get<std::string>();
      }
    }
  } catch (const nlohmann::json::exception&) {
    fail("resume", "{} has no readable trainer metadata to find the best checkpoint in", last);
  }
  MANTISSA_CHECK(!best.empty(), "resume",
                 "{} records no best checkpoint: 'best' needs a ModelCheckpoint with a monitor "
                 "(--checkpoint-monitor); use 'last' or a file",
                 last);
  MANTISSA_CHECK(std::filesystem::is_regular_file(best), "resume",
                 "the best checkpoint {} recorded in {} no longer exists", quote_untrusted(best),
                 last);
  return best;
}

}  // namespace mantissa::train
